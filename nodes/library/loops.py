"""Today's ComfyUI Start Loop / End Loop (`comfy_extras.nodes_loop`, added after 0.3.64): the nodes between a
Start Loop and its End Loop (the body: downstream of the start and upstream of the end) run once per
iteration: `simple` N times, `For` over range(start, stop, step), `List` once per item of a list.

ComfyUI re-runs the body in place; here End Loop unrolls it by node expansion, one iteration at a time, as
ComfyUI's own loop tests do: after an iteration that is not the last, End Loop expands into a copy of the
Start Loop (with the next index and the carried value linked from this iteration's next_iteration_value),
a copy of the body, and a copy of itself, whose result becomes its own. The outputs are ComfyUI's: per
iteration index, is_first, is_last, list item and carried value; End Loop gives the last iteration's
output_value, or every iteration's with accumulate. Loops nested in a loop body are refused (not written yet)."""

from __future__ import annotations

from typing import Any

from nodes.dynamic_inputs import ANY, DynamicSection, autogrow_prefix, combo_inputs, dynamic_combo, match_type

MODULE = "comfy_extras.nodes_loop"
ITERATION = "_iteration"  # Start Loop copies: which iteration they stand for
IS_LAST = "_is_last"  # End Loop copies: linked to their Start Loop's is_last output
START = "_start"  # End Loop copies: the id of their Start Loop
ROOT = "_root"  # End Loop copies: the id of the workflow's End Loop (their ids grow from it)
EARLIER = "_earlier."  # End Loop copies: the earlier iterations' output_value, for accumulate
MODE = dynamic_combo(
    {
        "simple": {"num_iterations": ("INT", {"default": 4, "min": 0, "tooltip": "How many times the body runs."})},
        "For": {
            "start_iteration_index": ("INT", {"default": 0, "tooltip": "The first iteration_index."}),
            "max_iteration": (
                "INT",
                {"default": 4, "max": 0xFFFFFFFFFFFFFFFF, "tooltip": "iteration_index stops below this."},
            ),
            "step": ("INT", {"default": 1, "min": 1, "tooltip": "What iteration_index grows by."}),
        },
        "List": {"list": match_type("list_item", tooltip="The body runs once per item of this list.")},
    },
    tooltip="How the iterations are counted.",
)
TERMINATIONS = autogrow_prefix(
    "termination",
    (ANY, {"tooltip": "A side effect (e.g. a preview) to run in every iteration; its value is not returned."}),
    prefix="termination",
    minimum=0,
    maximum=50,
)


def is_link(value: Any) -> bool:
    """A link of the API format: [source node id, output index]."""
    return isinstance(value, list) and len(value) == 2 and isinstance(value[0], str) and isinstance(value[1], int)


def iterations(mode: str, options: dict[str, list]) -> tuple[range, list | None]:
    """The iteration indices and, in List mode, the items (options: the mode's inputs, as lists)."""
    if mode == "simple":
        return range(options.get("num_iterations", [4])[0]), None
    if mode == "For":
        step = options.get("step", [1])[0]
        if step == 0:
            raise ValueError("Start Loop: step must not be 0")
        return range(options.get("start_iteration_index", [0])[0], options.get("max_iteration", [4])[0], step), None
    if mode == "List":
        items = list(options.get("list", []))
        return range(len(items)), items
    raise ValueError(f"Start Loop: unknown mode {mode!r} (simple, For or List)")


class StartLoop:
    RELATIVE_PYTHON_MODULE = MODULE
    FUNCTION = "execute"
    CATEGORY = "utilities/looping"
    INPUT_IS_LIST = True

    @classmethod
    def INPUT_TYPES(cls):
        return {
            "required": DynamicSection({"mode": MODE}, private={ITERATION: ("INT", {})}),
            "optional": {
                "parent_iteration": (
                    "INT",
                    {"forceInput": True, "tooltip": "Nested loops: the outer Start Loop's iteration_index."},
                ),
                "initial_iteration_value": match_type(
                    "carried_value", tooltip="current_iteration_value of the first iteration."
                ),
            },
        }

    RETURN_TYPES = ("INT", "BOOLEAN", "BOOLEAN", match_type("x")[0], match_type("x")[0])
    RETURN_NAMES = ("iteration_index", "is_first", "is_last", "list_item", "current_iteration_value")
    OUTPUT_TOOLTIPS = (
        "This iteration's index.",
        "True in the first iteration.",
        "True in the last iteration.",
        "This iteration's item of the list (List mode).",
        "initial_iteration_value first, then what End Loop's next_iteration_value gave.",
    )
    OUTPUT_MATCHTYPES = (None, None, None, "list_item", "carried_value")
    DESCRIPTION = "Starts a loop: the nodes up to its End Loop run once per iteration."

    @classmethod
    def IS_CHANGED(cls, **kwargs: Any) -> float:
        return float("nan")  # every run counts its iterations afresh, as ComfyUI's does

    def execute(
        self,
        mode: list[str],
        parent_iteration: list | None = None,
        initial_iteration_value: list | None = None,
        **kwargs: Any,
    ):
        values, items = iterations(mode[0], combo_inputs(kwargs, "mode"))
        index = kwargs.get(ITERATION, [0])[0]
        if not values:
            # ComfyUI then skips the body; unrolling runs the body's first copy before End Loop decides
            raise ValueError("Start Loop: the mode gives no iteration; loops of zero iterations are not supported")
        carried = initial_iteration_value[0] if initial_iteration_value else None
        return (
            values[index],
            index == 0,
            index == len(values) - 1,
            items[index] if items is not None else None,
            carried,
        )


def _links(node: dict) -> list[tuple[str, str]]:
    return [(name, value[0]) for name, value in node["inputs"].items() if is_link(value)]


def _upstream(dynprompt: Any, starts: list[str]) -> set[str]:
    seen, todo = set(), list(starts)
    while todo:
        node_id = todo.pop()
        if node_id in seen:
            continue
        seen.add(node_id)
        todo += [source for _, source in _links(dynprompt.get_node(node_id))]
    return seen


def _downstream(dynprompt: Any, start: str) -> set[str]:
    consumers: dict[str, set[str]] = {}
    for node_id in dynprompt.all_node_ids():
        for _, source in _links(dynprompt.get_node(node_id)):
            consumers.setdefault(source, set()).add(node_id)
    seen, todo = set(), [start]
    while todo:
        node_id = todo.pop()
        for consumer in consumers.get(node_id, ()):
            if consumer not in seen:
                seen.add(consumer)
                todo.append(consumer)
    return seen


def find_start(dynprompt: Any, end_id: str) -> str:
    """The Start Loop nearest upstream of an End Loop."""
    frontier, seen = [source for _, source in _links(dynprompt.get_node(end_id))], set()
    while frontier:
        following = []
        for node_id in frontier:
            if node_id in seen:
                continue
            seen.add(node_id)
            node = dynprompt.get_node(node_id)
            if node["class_type"] == "StartLoop":
                return node_id
            following += [source for _, source in _links(node)]
        frontier = following
    raise ValueError(f"End Loop {end_id} does not belong to a Start Loop: none is linked upstream of it")


class EndLoop:
    RELATIVE_PYTHON_MODULE = MODULE
    FUNCTION = "execute"
    CATEGORY = "utilities/looping"
    INPUT_IS_LIST = True

    @classmethod
    def INPUT_TYPES(cls):
        return {
            "required": DynamicSection(
                {
                    "accumulate": (
                        "BOOLEAN",
                        {
                            "default": False,
                            "tooltip": "Return every iteration's output_value, not only the last one's.",
                        },
                    )
                },
                private={IS_LAST: ("BOOLEAN", {}), START: ("STRING", {}), ROOT: ("STRING", {}), EARLIER: (ANY, {})},
            ),
            "optional": DynamicSection(
                {
                    "output_value": match_type("output_value", tooltip="What the loop returns."),
                    "next_iteration_value": match_type(
                        "carried_value", tooltip="Becomes the next iteration's current_iteration_value."
                    ),
                    "terminations": TERMINATIONS,
                }
            ),
            "hidden": {"dynprompt": "DYNPROMPT", "unique_id": "UNIQUE_ID"},
        }

    RETURN_TYPES = (match_type("output_value")[0],)
    RETURN_NAMES = ("outputs",)
    OUTPUT_IS_LIST = (True,)
    OUTPUT_TOOLTIPS = ("The last iteration's output_value, or every iteration's with accumulate.",)
    OUTPUT_MATCHTYPES = ("output_value",)
    DESCRIPTION = "Ends a loop started by a Start Loop upstream of it and returns what the iterations made."

    @classmethod
    def IS_CHANGED(cls, **kwargs: Any) -> float:
        return float("nan")

    def execute(
        self,
        accumulate: list[bool],
        output_value: list | None = None,
        next_iteration_value: list | None = None,
        dynprompt: list | None = None,
        unique_id: list | None = None,
        **kwargs: Any,
    ):
        graph, me = dynprompt[0], unique_id[0]
        node = graph.get_node(me)
        if IS_LAST not in kwargs:
            # the End Loop of the workflow: a copy of itself that knows its Start Loop and waits for is_last
            start = find_start(graph, me)
            return {
                "result": ([me + ".it0.end", 0],),
                "expand": {
                    me + ".it0.end": {
                        "class_type": "EndLoop",
                        "inputs": {**node["inputs"], IS_LAST: [start, 2], START: start, ROOT: me},
                    }
                },
            }
        earlier = [
            value
            for key in sorted((k for k in kwargs if k.startswith(EARLIER)), key=lambda k: int(k[len(EARLIER) :]))
            for value in kwargs[key]
        ]
        if kwargs[IS_LAST][0]:
            values = (earlier + list(output_value or [])) if accumulate[0] else list(output_value or [])
            # Each End Loop above this copy takes its result through one expansion, and an expansion hands
            # a list output's items on as if they were the outputs of one call (ComfyUI's rule): wrap the
            # list once per level so the workflow's End Loop ends up with the list itself.
            depth = graph.get_node(kwargs[START][0])["inputs"].get(ITERATION, 0) + 1
            for _ in range(depth):
                values = [values]
            return (values,)
        return self._next_iteration(graph, me, node, kwargs[START][0], kwargs[ROOT][0])

    @staticmethod
    def _next_iteration(graph: Any, me: str, node: dict, start: str, root: str) -> dict:
        sources = [
            value[0]
            for name, value in node["inputs"].items()
            if is_link(value) and not name.startswith("_") and name != "accumulate"
        ]
        body = (_upstream(graph, sources) & _downstream(graph, start)) - {start, me}
        nested = sorted(n for n in body if graph.get_node(n)["class_type"] in ("StartLoop", "EndLoop"))
        if nested:
            raise ValueError(f"End Loop {me}: loops inside a loop body ({', '.join(nested)}) are not supported yet")
        start_node = graph.get_node(start)
        index = start_node["inputs"].get(ITERATION, 0) + 1
        prefix = f"{root}.it{index}."
        rename = {old: prefix + old.rsplit(".", 1)[-1] + f"_{n}" for n, old in enumerate(sorted(body | {start}))}

        def moved(inputs: dict) -> dict:
            return {k: [rename[v[0]], v[1]] if is_link(v) and v[0] in rename else v for k, v in inputs.items()}

        new_start = {**start_node["inputs"], ITERATION: index}
        carried = node["inputs"].get("next_iteration_value")
        if is_link(carried):
            new_start["initial_iteration_value"] = carried  # this iteration's value, computed already
        graph_out = {rename[start]: {"class_type": "StartLoop", "inputs": new_start}}
        for old in body:
            graph_out[rename[old]] = {
                "class_type": graph.get_node(old)["class_type"],
                "inputs": moved(graph.get_node(old)["inputs"]),
            }
        end_inputs = moved({k: v for k, v in node["inputs"].items() if not k.startswith("_")})
        done = sum(1 for k in node["inputs"] if k.startswith(EARLIER))
        for k, v in node["inputs"].items():
            if k.startswith(EARLIER):
                end_inputs[k] = v
        if is_link(node["inputs"].get("output_value")):
            end_inputs[f"{EARLIER}{done}"] = node["inputs"]["output_value"]
        end_inputs.update({IS_LAST: [rename[start], 2], START: rename[start], ROOT: root})
        graph_out[prefix + "end"] = {"class_type": "EndLoop", "inputs": end_inputs}
        return {"result": ([prefix + "end", 0],), "expand": graph_out}


NODE_CLASS_MAPPINGS = {"StartLoop": StartLoop, "EndLoop": EndLoop}
NODE_DISPLAY_NAME_MAPPINGS = {"StartLoop": "Start Loop", "EndLoop": "End Loop"}
