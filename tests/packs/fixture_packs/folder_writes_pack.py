"""What packs do to `folder_paths` at import, as the packs themselves write it: ComfyUI-GGUF adds folder keys
that share the diffusion_models / text_encoders path lists and list only .gguf files; VideoHelperSuite adds
a key whose paths are an empty tuple and, when an extra_model_paths.yaml made the key first, adds its
extension to the set found there."""

import folder_paths


def _gguf_style(key, targets):
    base = folder_paths.folder_names_and_paths.get(key, ([], {}))
    base = base[0] if isinstance(base[0], (list, set, tuple)) else []
    target = next((t for t in targets if t in folder_paths.folder_names_and_paths), targets[0])
    shared, _ = folder_paths.folder_names_and_paths.get(target, ([], {}))
    folder_paths.folder_names_and_paths[key] = (shared or base, {".gguf"})


_gguf_style("unet_gguf", ["diffusion_models", "unet"])
_gguf_style("clip_gguf", ["text_encoders", "clip"])

if "VHS_video_formats" not in folder_paths.folder_names_and_paths:
    folder_paths.folder_names_and_paths["VHS_video_formats"] = ((), {".json"})
if len(folder_paths.folder_names_and_paths["VHS_video_formats"][1]) == 0:
    folder_paths.folder_names_and_paths["VHS_video_formats"][1].add(".json")


class GGUFLikeLoader:
    @classmethod
    def INPUT_TYPES(cls):
        return {
            "required": {
                "unet_name": (folder_paths.get_filename_list("unet_gguf"),),
                "format": (folder_paths.get_filename_list("VHS_video_formats"),),
            }
        }

    RETURN_TYPES = ("STRING",)
    FUNCTION = "load"
    CATEGORY = "folder_writes_pack"

    def load(self, unet_name, format):
        return (folder_paths.get_full_path_or_raise("unet_gguf", unet_name),)


NODE_CLASS_MAPPINGS = {"GGUFLikeLoader": GGUFLikeLoader}
