"""A convolution's bias moved past the permute that reads its result as [N, H, W, C] (ConvNeXt's `conv(x).permute(0,
2, 3, 1)`): `conv(x, w, None).permute(0, 2, 3, 1) + b`, so the kernel after the permute adds it as its prologue.

Run channels-last (the default schedule's choice for such a convolution), cuDNN's NHWC kernels leave the bias to a
separate PyTorch pass over the result (109 us of a ConvNeXt block's 1.2 ms on the H200), which eager's channels-last
convolution runs too: the result is rounded to its dtype, then the bias added, as here. Only where the permute is the
convolution's one reader, so nothing else sees the result without its bias.
"""

from __future__ import annotations

import torch

from drtriton_lsp.compiler.templates.pointwise import CHANNELS_LAST_ORDER

aten = torch.ops.aten

# convolution overloads whose third argument is the bias, added along the channels (dim 1)
BIASED_CONVOLUTIONS = (aten.conv2d.default, aten.convolution.default)


def move_conv_bias_past_channels_last_permute(graph_module: torch.fx.GraphModule) -> list[str]:
    """Rewrite, in place, each 4-d convolution with a bias whose one reader permutes it to [N, H, W, C]: the bias is
    added after the permute instead. Returns the names of the adds made."""
    graph = graph_module.graph
    made: list[str] = []
    for convolution in list(graph.nodes):
        permute = _channels_last_reader(convolution)
        if permute is None:
            continue
        bias = convolution.args[2]
        convolution.args = (*convolution.args[:2], None, *convolution.args[3:])
        with graph.inserting_after(permute):
            add = graph.create_node("call_function", aten.add.Tensor, (permute, bias), name="add")
        add.meta = {**permute.meta, "val": permute.meta["val"] + bias.meta["val"]}
        permute.replace_all_uses_with(add, delete_user_cb=lambda user: user is not add)
        made.append(add.name)
    if made:
        graph_module.recompile()
    return made


def _channels_last_reader(convolution: torch.fx.Node) -> torch.fx.Node | None:
    """The permute to [N, H, W, C] that is the one reader of `convolution`, a biased 4-d convolution; else None."""
    if convolution.op != "call_function" or convolution.target not in BIASED_CONVOLUTIONS or convolution.kwargs:
        return None
    if len(convolution.args) < 3 or not isinstance(convolution.args[2], torch.fx.Node):
        return None
    value, bias = convolution.meta.get("val"), convolution.args[2].meta.get("val")
    if value is None or bias is None or value.dim() != 4 or bias.dim() != 1 or bias.dtype != value.dtype:
        return None
    if len(convolution.users) != 1:
        return None
    [permute] = convolution.users
    if permute.target is not aten.permute.default or permute.args[0] is not convolution:
        return None
    # the permute that reads [N, C, H, W] as [N, H, W, C]
    return permute if tuple(dim % 4 for dim in permute.args[1]) == CHANNELS_LAST_ORDER else None
