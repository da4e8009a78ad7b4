"""ComfyUI's text nodes (`comfy_extras.nodes_string`): concatenate, substring, length, case, trim, replace,
contains, compare and the regular-expression nodes (Python's `re` syntax).

Unlike ComfyUI, a node whose text would pass the server's text limit fails with TextTooLong, and the
regular-expression nodes match in a worker process that an interrupt or the time limit stops
(nodes.regex_runner): one prompt's runaway text cannot take the server's memory or time.
"""

from __future__ import annotations

import re

from nodes import regex_runner
from nodes.text_limits import check_length

MODULE = "comfy_extras.nodes_string"
TEXT = ("STRING", {"multiline": True})


def _flags(case_insensitive: bool, multiline: bool, dotall: bool) -> int:
    return (
        (re.IGNORECASE if case_insensitive else 0) | (re.MULTILINE if multiline else 0) | (re.DOTALL if dotall else 0)
    )


def _combo(options: list[str]) -> tuple:
    return ("COMBO", {"multiselect": False, "options": options})


class _StringNode:
    RELATIVE_PYTHON_MODULE = MODULE
    FUNCTION = "execute"
    CATEGORY = "utils/string"
    RETURN_TYPES = ("STRING",)


class StringConcatenate(_StringNode):
    @classmethod
    def INPUT_TYPES(cls):
        return {
            "required": {
                "string_a": TEXT,
                "string_b": TEXT,
                "delimiter": ("STRING", {"multiline": False, "default": ""}),
            }
        }

    DESCRIPTION = "string_a, the delimiter, then string_b."

    def execute(self, string_a: str, string_b: str, delimiter: str):
        result = delimiter.join((string_a, string_b))
        # a text concatenated with itself node after node doubles each time: each step is checked
        check_length(type(self).__name__, len(result))
        return (result,)


class StringSubstring(_StringNode):
    @classmethod
    def INPUT_TYPES(cls):
        return {"required": {"string": TEXT, "start": ("INT", {}), "end": ("INT", {})}}

    DESCRIPTION = "The characters from start up to (not including) end; negative positions count from the end."

    def execute(self, string: str, start: int, end: int):
        return (string[start:end],)


class StringLength(_StringNode):
    @classmethod
    def INPUT_TYPES(cls):
        return {"required": {"string": TEXT}}

    RETURN_TYPES = ("INT",)
    RETURN_NAMES = ("length",)
    DESCRIPTION = "The number of characters of the text."

    def execute(self, string: str):
        return (len(string),)


class CaseConverter(_StringNode):
    MODES = {"UPPERCASE": str.upper, "lowercase": str.lower, "Capitalize": str.capitalize, "Title Case": str.title}

    @classmethod
    def INPUT_TYPES(cls):
        return {"required": {"string": TEXT, "mode": _combo(list(cls.MODES))}}

    DESCRIPTION = "Changes the case of the text."

    def execute(self, string: str, mode: str):
        # An unknown mode (ComfyUI does not check combo values of this node) leaves the text as it is.
        result = self.MODES.get(mode, str)(string)
        check_length(type(self).__name__, len(result))  # "ß".upper() is "SS": case can lengthen a text
        return (result,)


class StringTrim(_StringNode):
    MODES = {"Both": str.strip, "Left": str.lstrip, "Right": str.rstrip}

    @classmethod
    def INPUT_TYPES(cls):
        return {"required": {"string": TEXT, "mode": _combo(list(cls.MODES))}}

    DESCRIPTION = "Removes whitespace from the start, the end or both ends of the text."

    def execute(self, string: str, mode: str):
        return (self.MODES.get(mode, str)(string),)


class StringReplace(_StringNode):
    @classmethod
    def INPUT_TYPES(cls):
        return {"required": {"string": TEXT, "find": TEXT, "replace": TEXT}}

    DESCRIPTION = "Replaces every occurrence of `find` (plain text) with `replace`."

    def execute(self, string: str, find: str, replace: str):
        # The length is known before the text is built: an empty `find` matches at every position.
        check_length(type(self).__name__, len(string) + string.count(find) * (len(replace) - len(find)))
        return (string.replace(find, replace),)


class StringContains(_StringNode):
    @classmethod
    def INPUT_TYPES(cls):
        return {"required": {"string": TEXT, "substring": TEXT, "case_sensitive": ("BOOLEAN", {"default": True})}}

    RETURN_TYPES = ("BOOLEAN",)
    RETURN_NAMES = ("contains",)
    DESCRIPTION = "Whether the text contains the substring."

    def execute(self, string: str, substring: str, case_sensitive: bool):
        if case_sensitive:
            return (substring in string,)
        return (substring.lower() in string.lower(),)


class StringCompare(_StringNode):
    TESTS = {"Starts With": str.startswith, "Ends With": str.endswith, "Equal": str.__eq__}

    @classmethod
    def INPUT_TYPES(cls):
        return {
            "required": {
                "string_a": TEXT,
                "string_b": TEXT,
                "mode": _combo(list(cls.TESTS)),
                "case_sensitive": ("BOOLEAN", {"default": True}),
            }
        }

    RETURN_TYPES = ("BOOLEAN",)
    DESCRIPTION = "Whether string_a starts with, ends with or equals string_b."

    def execute(self, string_a: str, string_b: str, mode: str, case_sensitive: bool):
        a, b = (string_a, string_b) if case_sensitive else (string_a.lower(), string_b.lower())
        return (self.TESTS[mode](a, b),)


class RegexMatch(_StringNode):
    @classmethod
    def INPUT_TYPES(cls):
        return {
            "required": {
                "string": TEXT,
                "regex_pattern": TEXT,
                "case_insensitive": ("BOOLEAN", {"default": True}),
                "multiline": ("BOOLEAN", {"default": False}),
                "dotall": ("BOOLEAN", {"default": False}),
            }
        }

    RETURN_TYPES = ("BOOLEAN",)
    RETURN_NAMES = ("matches",)
    DESCRIPTION = "Whether the pattern matches anywhere in the text (false for an invalid pattern)."

    def execute(self, string: str, regex_pattern: str, case_insensitive: bool, multiline: bool, dotall: bool):
        try:
            return (
                regex_runner.run(
                    type(self).__name__,
                    "search",
                    pattern=regex_pattern,
                    string=string,
                    flags=_flags(case_insensitive, multiline, dotall),
                ),
            )
        except re.error:
            return (False,)


class RegexExtract(_StringNode):
    @classmethod
    def INPUT_TYPES(cls):
        return {
            "required": {
                "string": TEXT,
                "regex_pattern": TEXT,
                "mode": _combo(["First Match", "All Matches", "First Group", "All Groups"]),
                "case_insensitive": ("BOOLEAN", {"default": True}),
                "multiline": ("BOOLEAN", {"default": False}),
                "dotall": ("BOOLEAN", {"default": False}),
                "group_index": ("INT", {"default": 1, "min": 0, "max": 100}),
            }
        }

    DESCRIPTION = (
        "The first match, all matches, the group `group_index` of the first match, or that group "
        "of every match (several results one per line); empty for no match or an invalid pattern."
    )

    def execute(
        self,
        string: str,
        regex_pattern: str,
        mode: str,
        case_insensitive: bool,
        multiline: bool,
        dotall: bool,
        group_index: int,
    ):
        try:
            return (
                regex_runner.run(
                    type(self).__name__,
                    "extract",
                    pattern=regex_pattern,
                    string=string,
                    flags=_flags(case_insensitive, multiline, dotall),
                    mode=mode,
                    group=group_index,
                ),
            )
        except re.error:
            return ("",)


class RegexReplace(_StringNode):
    @classmethod
    def INPUT_TYPES(cls):
        return {
            "required": {"string": TEXT, "regex_pattern": TEXT, "replace": TEXT},
            "optional": {
                "case_insensitive": ("BOOLEAN", {"default": True}),
                "multiline": ("BOOLEAN", {"default": False}),
                "dotall": ("BOOLEAN", {"default": False, "tooltip": "Let '.' match newlines too."}),
                "count": (
                    "INT",
                    {"default": 0, "min": 0, "max": 100, "tooltip": "At most this many replacements; 0 replaces all."},
                ),
            },
        }

    DESCRIPTION = "Replaces the matches of a regular expression (the replacement may use \\1 or \\g<name>)."

    def execute(
        self,
        string: str,
        regex_pattern: str,
        replace: str,
        case_insensitive: bool = True,
        multiline: bool = False,
        dotall: bool = False,
        count: int = 0,
    ):
        return (
            regex_runner.run(
                type(self).__name__,
                "sub",
                pattern=regex_pattern,
                repl=replace,
                string=string,
                count=count,
                flags=_flags(case_insensitive, multiline, dotall),
            ),
        )


NODE_CLASS_MAPPINGS = {
    cls.__name__: cls
    for cls in (
        StringConcatenate,
        StringSubstring,
        StringLength,
        CaseConverter,
        StringTrim,
        StringReplace,
        StringContains,
        StringCompare,
        RegexMatch,
        RegexExtract,
        RegexReplace,
    )
}

NODE_DISPLAY_NAME_MAPPINGS = {
    "StringConcatenate": "Concatenate",
    "StringSubstring": "Substring",
    "StringLength": "Length",
    "CaseConverter": "Case Converter",
    "StringTrim": "Trim",
    "StringReplace": "Replace",
    "StringContains": "Contains",
    "StringCompare": "Compare",
    "RegexMatch": "Regex Match",
    "RegexExtract": "Regex Extract",
    "RegexReplace": "Regex Replace",
}
