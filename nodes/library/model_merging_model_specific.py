"""ComfyUI's comfy_extras.nodes_model_merging_model_specific: ModelMergeBlocks with one ratio per block of
each model family, the prefixes being the family's diffusion-model key names.

Every class builds a correct merge ref. Only SD1, SD2 and SDXL models (ldm single files) can be loaded
merged: for the other families the merged ref is refused with a clear error when an executor loads it
(nodes/models/loader.py), as their diffusion models are not merged by our loaders yet."""

from __future__ import annotations

from nodes.library.model_merging import RATIO, ModelMergeBlocks

MODULE = "comfy_extras.nodes_model_merging_model_specific"


def _family(class_name: str, prefixes: list[str], description: str) -> type:
    def block_inputs(cls) -> dict[str, tuple]:
        return {p: RATIO for p in prefixes}

    return type(
        class_name,
        (ModelMergeBlocks,),
        {
            "RELATIVE_PYTHON_MODULE": MODULE,
            "CATEGORY": "advanced/model_merging/model_specific",
            "block_inputs": classmethod(block_inputs),
            "__doc__": description,
            "DESCRIPTION": f"Blends two {description} models with a ratio per block (1.0 = model1's block).",
        },
    )


def _numbered(pattern: str, count: int) -> list[str]:
    return [pattern.format(i) for i in range(count)]


_SD_UNET = (
    ["time_embed.", "label_emb."]
    + _numbered("input_blocks.{}.", 12)
    + _numbered("middle_block.{}.", 3)
    + _numbered("output_blocks.{}.", 12)
    + ["out."]
)
# ComfyUI writes the SDXL block prefixes without their trailing dot.
_SDXL_UNET = (
    ["time_embed.", "label_emb."]
    + _numbered("input_blocks.{}", 9)
    + _numbered("middle_block.{}", 3)
    + _numbered("output_blocks.{}", 9)
    + ["out."]
)
_SD3_HEAD = ["pos_embed.", "x_embedder.", "context_embedder.", "y_embedder.", "t_embedder."]
_COSMOS_HEAD = ["pos_embedder.", "extra_pos_embedder.", "x_embedder.", "t_embedder.", "affline_norm."]
_PREDICT2_HEAD = ["pos_embedder.", "x_embedder.", "t_embedder.", "t_embedding_norm."]

FAMILIES: dict[str, tuple[list[str], str]] = {
    "ModelMergeSD1": (_SD_UNET, "SD1"),
    "ModelMergeSD2": (_SD_UNET, "SD2"),
    "ModelMergeSDXL": (_SDXL_UNET, "SDXL"),
    "ModelMergeSD3_2B": (_SD3_HEAD + _numbered("joint_blocks.{}.", 24) + ["final_layer."], "SD3 medium"),
    "ModelMergeAuraflow": (
        ["init_x_linear.", "positional_encoding", "cond_seq_linear.", "register_tokens", "t_embedder."]
        + _numbered("double_layers.{}.", 4)
        + _numbered("single_layers.{}.", 32)
        + ["modF.", "final_linear."],
        "AuraFlow",
    ),
    "ModelMergeFlux1": (
        ["img_in.", "time_in.", "guidance_in", "vector_in.", "txt_in."]
        + _numbered("double_blocks.{}.", 19)
        + _numbered("single_blocks.{}.", 38)
        + ["final_layer."],
        "Flux.1",
    ),
    "ModelMergeSD35_Large": (_SD3_HEAD + _numbered("joint_blocks.{}.", 38) + ["final_layer."], "SD3.5 Large"),
    "ModelMergeMochiPreview": (
        ["pos_frequencies.", "t_embedder.", "t5_y_embedder.", "t5_yproj."]
        + _numbered("blocks.{}.", 48)
        + ["final_layer."],
        "Mochi preview",
    ),
    "ModelMergeLTXV": (
        ["patchify_proj.", "adaln_single.", "caption_projection."]
        + _numbered("transformer_blocks.{}.", 28)
        + ["scale_shift_table", "proj_out."],
        "LTX-Video",
    ),
    "ModelMergeCosmos7B": (_COSMOS_HEAD + _numbered("blocks.block{}.", 28) + ["final_layer."], "Cosmos 7B"),
    "ModelMergeCosmos14B": (_COSMOS_HEAD + _numbered("blocks.block{}.", 36) + ["final_layer."], "Cosmos 14B"),
    "ModelMergeWAN2_1": (
        ["patch_embedding.", "time_embedding.", "time_projection.", "text_embedding.", "img_emb."]
        + _numbered("blocks.{}.", 40)
        + ["head."],
        "Wan 2.1",
    ),
    "ModelMergeCosmosPredict2_2B": (
        _PREDICT2_HEAD + _numbered("blocks.{}.", 28) + ["final_layer."],
        "Cosmos Predict2 2B",
    ),
    "ModelMergeCosmosPredict2_14B": (
        _PREDICT2_HEAD + _numbered("blocks.{}.", 36) + ["final_layer."],
        "Cosmos Predict2 14B",
    ),
    "ModelMergeQwenImage": (
        ["pos_embeds.", "img_in.", "txt_norm.", "txt_in.", "time_text_embed."]
        + _numbered("transformer_blocks.{}.", 60)
        + ["proj_out."],
        "Qwen-Image",
    ),
}

NODE_CLASS_MAPPINGS = {name: _family(name, prefixes, what) for name, (prefixes, what) in FAMILIES.items()}
NODE_DISPLAY_NAME_MAPPINGS: dict[str, str] = {}
