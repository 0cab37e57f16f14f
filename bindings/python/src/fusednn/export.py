# SPDX-License-Identifier: Apache-2.0

"""Write fusednn bundles from PyTorch modules.

A bundle is a safetensors file whose ``__metadata__`` holds the model spec (JSON text under the
key ``"fusednn.spec"``) next to the weights, named as in the module's ``state_dict``::

    import fusednn.export
    fusednn.export.save_bundle(model, "model.safetensors", input_shape=(1, 28, 28))

Two ways of reading a module:

* an ``nn.Sequential`` (nested ones included) whose leaves are all supported layers is mapped
  child by child; layers are named by their dotted path (``"features.0"``);
* any other ``nn.Module`` is traced with ``torch.fx.symbolic_trace``, which also covers
  residual additions, ``torch.cat``, ``torch.flatten`` / ``x.view(x.size(0), -1)`` and the
  functional forms of the activations (``F.relu``...).

``Dropout`` and ``Identity`` are left out. Anything else that fusednn cannot express raises
:class:`ExportError` naming the module or graph node.

PyTorch is imported only when a function here is called, so ``import fusednn`` works without it.
"""

from __future__ import annotations

import json
import math
import operator
import os
from typing import TYPE_CHECKING, Any, Callable, Dict, List, Optional, Sequence, Tuple, Union

if TYPE_CHECKING:  # pragma: no cover - for type checkers only
    import torch

__all__ = [
    "ExportError",
    "SPEC_FORMAT_VERSION",
    "SPEC_METADATA_KEY",
    "export_module",
    "save_bundle",
    "spec_from_module",
]

SPEC_FORMAT_VERSION = 1
"""The value of the spec's ``"fusednn"`` key that this exporter writes."""

SPEC_METADATA_KEY = "fusednn.spec"
"""The safetensors metadata key under which a bundle carries its spec."""

_GRAPH_INPUT = "input"  # how a layer's "inputs" names the model input
_SHAPE_PROBE_BATCHES = (2, 3)  # batches traced to check that nothing fixes the batch size


class ExportError(ValueError):
    """The module cannot be written as a fusednn model; the message names the culprit."""


def _import_torch() -> Any:
    try:
        import torch  # noqa: F401  (imported for its side effect of being available)
        import torch.fx  # noqa: F401
    except ImportError as exc:
        raise ImportError(
            "fusednn.export needs PyTorch: install it with `pip install torch` "
            "(the rest of the fusednn package works without it)"
        ) from exc
    return torch


# ------------------------------------------------------------------------------------------------
# Spec assembly
# ------------------------------------------------------------------------------------------------


class _SpecBuilder:
    """Collects layers and the tensors they read, keeping names unique."""

    def __init__(self) -> None:
        self.layers: List[Dict[str, Any]] = []
        self.tensors: Dict[str, "torch.Tensor"] = {}
        self._names = {_GRAPH_INPUT}
        self._previous = _GRAPH_INPUT
        # id(module) -> name of the layer that first used it, to spot a module called again
        self._module_owner: Dict[int, str] = {}

    def unique_name(self, wanted: str) -> str:
        if wanted not in self._names:
            return wanted
        suffix = 2
        while f"{wanted}_{suffix}" in self._names:
            suffix += 1
        return f"{wanted}_{suffix}"

    def add(self, entry: Dict[str, Any], name: str, inputs: Sequence[str]) -> str:
        """Append a layer; its "inputs" key is written only when it differs from the default."""
        name = self.unique_name(name)
        layer: Dict[str, Any] = {"type": entry["type"], "name": name}
        layer.update((key, value) for key, value in entry.items() if key != "type")
        if list(inputs) != [self._previous]:
            layer["inputs"] = list(inputs)
        self.layers.append(layer)
        self._names.add(name)
        self._previous = name
        return name

    def add_module(
        self, module: "torch.nn.Module", qualified_name: str, inputs: Sequence[str],
        input_rank: int,
    ) -> str:
        """Append the layer a supported module maps to, with its weights.

        The weights are saved under the module's state_dict names. A module called a second time
        becomes a second layer with its own copy of the weights, saved under that layer's name:
        fusednn gives every layer its own tensors (it folds some of them into others).
        """
        entry, roles = _module_entry(module, qualified_name, input_rank)
        first_use = id(module) not in self._module_owner
        name = self.add(entry, qualified_name, inputs)
        prefix = qualified_name if first_use else name
        if prefix != name and roles:
            self.layers[-1]["weights"] = {role: f"{prefix}.{role}" for role in roles}
        for role in roles:
            tensor_name = f"{prefix}.{role}"
            if tensor_name in self.tensors:
                raise ExportError(f"layer '{name}': tensor name '{tensor_name}' is already taken "
                                  "by another layer; rename the module")
            self.tensors[tensor_name] = _export_tensor(getattr(module, role))
        self._module_owner.setdefault(id(module), name)
        return name

    def spec(self, model_name: str, input_shape: Tuple[int, ...], output: str) -> Dict[str, Any]:
        if output == _GRAPH_INPUT:
            raise ExportError("the module returns its input unchanged: there is nothing to export")
        if not self.layers:
            raise ExportError("the module has no layers to export")
        return {
            "fusednn": SPEC_FORMAT_VERSION,
            "name": model_name,
            "input": {"shape": list(input_shape), "dtype": "float32"},
            "layers": self.layers,
            "output": output,
        }


def _export_tensor(tensor: "torch.Tensor") -> "torch.Tensor":
    # clone(): safetensors refuses tensors that share storage (tied or reused weights).
    return tensor.detach().to(device="cpu", dtype=_import_torch().float32).contiguous().clone()


# ------------------------------------------------------------------------------------------------
# Modules
# ------------------------------------------------------------------------------------------------


def _pair(value: Union[int, Sequence[int]], what: str, where: str) -> Tuple[int, int]:
    if isinstance(value, int):
        return (value, value)
    values = tuple(int(v) for v in value)
    if len(values) != 2:
        raise ExportError(f"{where}: {what} {value!r} is not an int or a pair")
    return values[0], values[1]


def _pair_json(value: Tuple[int, int]) -> Union[int, List[int]]:
    """An int when both extents agree (as PyTorch users write it), else [height, width]."""
    return value[0] if value[0] == value[1] else [value[0], value[1]]


def _normalize_dim(dim: int, rank_with_batch: int, what: str, where: str) -> int:
    """A PyTorch dim (batch = 0, negatives allowed) as a non-negative dim that is not the batch."""
    if not -rank_with_batch <= dim < rank_with_batch:
        raise ExportError(f"{where}: {what} {dim} is out of range for a {rank_with_batch}-d tensor")
    resolved = dim % rank_with_batch
    if resolved == 0:
        raise ExportError(f"{where}: {what} {dim} is the batch dimension, which fusednn keeps apart")
    return resolved


def _softmax_dim(dim: Optional[int], rank_with_batch: int, where: str) -> int:
    if dim is None:
        # PyTorch's implicit choice for softmax(dim=None): 0 for 0-, 1- and 3-d inputs, else 1.
        dim = 0 if rank_with_batch in (0, 1, 3) else 1
    resolved = _normalize_dim(dim, rank_with_batch, "softmax dim", where)
    return -1 if resolved == rank_with_batch - 1 else resolved


def _conv_padding(module: Any, kernel: Tuple[int, int], dilation: Tuple[int, int],
                  where: str) -> Tuple[int, int]:
    padding = module.padding
    if isinstance(padding, str):
        if padding == "valid":
            return (0, 0)
        # "same": PyTorch pads d * (k - 1) in total, the extra element at the end when it is odd.
        totals = [d * (k - 1) for k, d in zip(kernel, dilation)]
        if any(total % 2 for total in totals):
            raise ExportError(f"{where}: padding='same' with an even effective kernel pads "
                              "unevenly, which fusednn does not support; pad explicitly")
        return (totals[0] // 2, totals[1] // 2)
    return _pair(padding, "padding", where)


def _pool_attributes(kernel_size: Any, stride: Any, padding: Any, where: str) -> Dict[str, Any]:
    kernel = _pair(kernel_size, "kernel_size", where)
    strides = kernel if stride is None or (not isinstance(stride, int) and len(stride) == 0) \
        else _pair(stride, "stride", where)
    return {
        "kernel_size": _pair_json(kernel),
        "stride": _pair_json(strides),
        "padding": _pair_json(_pair(padding, "padding", where)),
    }


def _module_entry(module: Any, where: str, input_rank: int) -> Tuple[Dict[str, Any], List[str]]:
    """The spec entry (without name) of a supported module and the weight roles it reads.

    input_rank counts the batch dimension.
    """
    torch = _import_torch()
    nn = torch.nn
    kind = type(module)
    if kind is nn.Linear:
        has_bias = module.bias is not None
        return ({"type": "Linear", "in_features": module.in_features,
                 "out_features": module.out_features, "bias": has_bias},
                ["weight", "bias"] if has_bias else ["weight"])
    if kind is nn.Conv2d:
        if module.padding_mode != "zeros":
            raise ExportError(f"{where}: Conv2d padding_mode={module.padding_mode!r} is not "
                              "supported (only 'zeros')")
        kernel = _pair(module.kernel_size, "kernel_size", where)
        dilation = _pair(module.dilation, "dilation", where)
        has_bias = module.bias is not None
        return ({"type": "Conv2d", "in_channels": module.in_channels,
                 "out_channels": module.out_channels, "kernel_size": _pair_json(kernel),
                 "stride": _pair_json(_pair(module.stride, "stride", where)),
                 "padding": _pair_json(_conv_padding(module, kernel, dilation, where)),
                 "dilation": _pair_json(dilation), "groups": module.groups, "bias": has_bias},
                ["weight", "bias"] if has_bias else ["weight"])
    if kind is nn.MaxPool2d:
        if _pair(module.dilation, "dilation", where) != (1, 1):
            raise ExportError(f"{where}: MaxPool2d with dilation is not supported")
        if module.ceil_mode or module.return_indices:
            raise ExportError(f"{where}: MaxPool2d ceil_mode / return_indices are not supported")
        entry: Dict[str, Any] = {"type": "MaxPool2d"}
        entry.update(_pool_attributes(module.kernel_size, module.stride, module.padding, where))
        return entry, []
    if kind is nn.AvgPool2d:
        if module.ceil_mode or module.divisor_override is not None:
            raise ExportError(f"{where}: AvgPool2d ceil_mode / divisor_override are not supported")
        entry = {"type": "AvgPool2d"}
        entry.update(_pool_attributes(module.kernel_size, module.stride, module.padding, where))
        entry["count_include_pad"] = bool(module.count_include_pad)
        return entry, []
    if kind is nn.Flatten:
        return _flatten_entry(module.start_dim, module.end_dim, input_rank, where), []
    if kind is nn.ReLU:
        return {"type": "ReLU"}, []
    if kind is nn.LeakyReLU:
        return {"type": "LeakyReLU", "negative_slope": float(module.negative_slope)}, []
    if kind is nn.GELU:
        return {"type": "GELU", "approximate": module.approximate}, []
    if kind is nn.SiLU:
        return {"type": "SiLU"}, []
    if kind is nn.Sigmoid:
        return {"type": "Sigmoid"}, []
    if kind is nn.Tanh:
        return {"type": "Tanh"}, []
    if kind is nn.Softmax:
        return {"type": "Softmax", "dim": _softmax_dim(module.dim, input_rank, where)}, []
    if kind is nn.LayerNorm:
        affine = bool(module.elementwise_affine)
        has_bias = affine and module.bias is not None
        roles = (["weight", "bias"] if has_bias else ["weight"]) if affine else []
        return ({"type": "LayerNorm", "normalized_shape": list(module.normalized_shape),
                 "eps": float(module.eps), "elementwise_affine": affine, "bias": has_bias},
                roles)
    if kind in (nn.BatchNorm1d, nn.BatchNorm2d):
        if not module.track_running_stats or module.running_mean is None:
            raise ExportError(f"{where}: {kind.__name__} without running statistics "
                              "(track_running_stats=False) cannot be exported for inference")
        affine = bool(module.affine)
        roles = (["weight", "bias"] if affine else []) + ["running_mean", "running_var"]
        return ({"type": kind.__name__, "num_features": module.num_features,
                 "eps": float(module.eps), "affine": affine}, roles)
    supported = ", ".join(sorted(t.__name__ for t in _supported_module_types()))
    raise ExportError(f"{where}: module type {kind.__module__}.{kind.__qualname__} is not "
                      f"supported; fusednn maps {supported} (Dropout and Identity are skipped)")


def _supported_module_types() -> Tuple[type, ...]:
    nn = _import_torch().nn
    return (nn.Linear, nn.Conv2d, nn.MaxPool2d, nn.AvgPool2d, nn.Flatten, nn.ReLU, nn.LeakyReLU,
            nn.GELU, nn.SiLU, nn.Sigmoid, nn.Tanh, nn.Softmax, nn.LayerNorm, nn.BatchNorm1d,
            nn.BatchNorm2d)


def _skipped_module_types() -> Tuple[type, ...]:
    nn = _import_torch().nn
    return (nn.Identity, nn.Dropout, nn.Dropout1d, nn.Dropout2d, nn.Dropout3d, nn.AlphaDropout,
            nn.FeatureAlphaDropout)


def _flatten_entry(start_dim: int, end_dim: int, input_rank: int, where: str) -> Dict[str, Any]:
    start = _normalize_dim(start_dim, input_rank, "flatten start_dim", where)
    end = _normalize_dim(end_dim, input_rank, "flatten end_dim", where)
    if end < start:
        raise ExportError(f"{where}: flatten end_dim {end_dim} comes before start_dim {start_dim}")
    return {"type": "Flatten", "start_dim": start,
            "end_dim": -1 if end == input_rank - 1 else end}


# ------------------------------------------------------------------------------------------------
# nn.Sequential
# ------------------------------------------------------------------------------------------------


def _sequential_leaves(module: Any, prefix: str = "") -> List[Tuple[str, Any]]:
    nn = _import_torch().nn
    leaves: List[Tuple[str, Any]] = []
    # _modules rather than named_children(): a module listed twice runs twice in forward().
    for name, child in module._modules.items():
        if child is None:
            continue
        path = f"{prefix}{name}"
        if type(child) is nn.Sequential:
            leaves.extend(_sequential_leaves(child, path + "."))
        else:
            leaves.append((path, child))
    return leaves


def _probe(module: Any, batch: int, input_shape: Tuple[int, ...]) -> "torch.Tensor":
    """A zero input of the module's floating dtype and device (float32 when it has none)."""
    torch = _import_torch()
    for tensor in list(module.parameters()) + list(module.buffers()):
        if tensor.is_floating_point():
            return torch.zeros((batch,) + input_shape, dtype=tensor.dtype, device=tensor.device)
    return torch.zeros((batch,) + input_shape)


def _export_sequential(module: Any, leaves: List[Tuple[str, Any]],
                       input_shape: Tuple[int, ...], builder: _SpecBuilder) -> str:
    skipped = _skipped_module_types()
    value = _probe(module, _SHAPE_PROBE_BATCHES[0], input_shape)
    current = _GRAPH_INPUT
    for path, child in leaves:
        input_rank = value.dim()
        try:
            value = child(value)
        except Exception as exc:  # the user's input_shape does not fit this layer
            raise ExportError(f"layer '{path}' ({type(child).__name__}) fails on a tensor of "
                              f"shape {tuple(value.shape)}: {exc}") from exc
        if isinstance(child, skipped):
            continue
        current = builder.add_module(child, path, [current], input_rank)
    return current


# ------------------------------------------------------------------------------------------------
# General modules through torch.fx
# ------------------------------------------------------------------------------------------------


class _FxExporter:
    """Walks a traced graph; each tensor node maps to a layer name (or to its input's name)."""

    def __init__(self, graph_module: Any, builder: _SpecBuilder) -> None:
        self.graph_module = graph_module
        self.builder = builder
        self.values: Dict[Any, str] = {}

    # --- helpers ------------------------------------------------------------------------------

    @staticmethod
    def _describe(node: Any) -> str:
        target = node.target
        if callable(target):
            target = getattr(target, "__name__", None) or repr(target)
        return f"node '{node.name}' ({node.op} {target})"

    @staticmethod
    def _shape(node: Any) -> Optional[Tuple[int, ...]]:
        meta = node.meta.get("tensor_meta")
        shape = getattr(meta, "shape", None)
        return tuple(int(d) for d in shape) if shape is not None else None

    def _is_tensor(self, node: Any) -> bool:
        return self._shape(node) is not None

    def _input(self, node: Any, value: Any) -> str:
        """The layer name behind an argument that must be a tensor."""
        fx = _import_torch().fx
        if not isinstance(value, fx.Node) or value not in self.values:
            raise ExportError(f"{self._describe(node)}: expected a tensor argument, got {value!r}")
        return self.values[value]

    @staticmethod
    def _arg(node: Any, index: int, name: str, default: Any = None) -> Any:
        if len(node.args) > index:
            return node.args[index]
        return node.kwargs.get(name, default)

    def _rank(self, node: Any) -> int:
        shape = self._shape(node)
        assert shape is not None
        return len(shape)

    def _add_layer(self, node: Any, entry: Dict[str, Any], inputs: Sequence[str]) -> None:
        self.values[node] = self.builder.add(entry, node.name, inputs)

    def _check_inplace(self, node: Any, inplace: Any) -> None:
        first = node.args[0] if node.args else None
        if inplace and first is not None and len(first.users) > 1:
            raise ExportError(f"{self._describe(node)}: an in-place operation on a tensor that "
                              "other operations also read changes what they see; make it "
                              "out-of-place")

    # --- node kinds ----------------------------------------------------------------------------

    def run(self) -> str:
        graph = self.graph_module.graph
        output = _GRAPH_INPUT
        for node in graph.nodes:
            if node.op == "placeholder":
                self.values[node] = _GRAPH_INPUT
            elif node.op == "get_attr":
                raise ExportError(f"{self._describe(node)}: the forward reads the tensor "
                                  f"attribute '{node.target}' directly; fusednn takes weights "
                                  "only through supported modules (nn.Linear, nn.Conv2d, ...)")
            elif node.op == "call_module":
                self._call_module(node)
            elif node.op in ("call_function", "call_method"):
                if not self._is_tensor(node):
                    continue  # a size or shape computation; consumers are checked by value
                self._call(node)
            elif node.op == "output":
                result = node.args[0]
                if not isinstance(result, _import_torch().fx.Node) or result not in self.values:
                    raise ExportError("the module must return one tensor, not "
                                      f"{type(result).__name__}")
                output = self.values[result]
        return output

    def _call_module(self, node: Any) -> None:
        module = self.graph_module.get_submodule(node.target)
        if isinstance(module, _skipped_module_types()):
            self.values[node] = self._input(node, node.args[0])
            return
        if len(node.args) != 1 or node.kwargs:
            raise ExportError(f"{self._describe(node)}: modules are called with one tensor")
        source = node.args[0]
        inputs = [self._input(node, source)]
        try:
            self.values[node] = self.builder.add_module(module, str(node.target), inputs,
                                                        self._rank(source))
        except ExportError as exc:
            raise ExportError(f"{self._describe(node)}: {exc}") from exc

    def _call(self, node: Any) -> None:
        handlers = _function_handlers() if node.op == "call_function" else _method_handlers()
        key = node.target
        handler = handlers.get(key)
        if handler is None:
            raise ExportError(f"{self._describe(node)} is not supported by the fusednn exporter")
        handler(self, node)

    # --- handlers, each for one family of operations -------------------------------------------

    def unary(self, node: Any, entry: Dict[str, Any]) -> None:
        self._add_layer(node, entry, [self._input(node, node.args[0])])

    def alias(self, node: Any) -> None:
        self.values[node] = self._input(node, node.args[0])

    def relu(self, node: Any) -> None:
        target_name = node.target if isinstance(node.target, str) else \
            getattr(node.target, "__name__", "")
        self._check_inplace(node, self._arg(node, 1, "inplace", False) or
                            target_name.endswith("_"))
        self.unary(node, {"type": "ReLU"})

    def leaky_relu(self, node: Any) -> None:
        self._check_inplace(node, self._arg(node, 2, "inplace", False))
        slope = self._arg(node, 1, "negative_slope", 0.01)
        self.unary(node, {"type": "LeakyReLU", "negative_slope": float(slope)})

    def gelu(self, node: Any) -> None:
        approximate = self._arg(node, 1, "approximate", "none")
        self.unary(node, {"type": "GELU", "approximate": approximate})

    def silu(self, node: Any) -> None:
        self._check_inplace(node, self._arg(node, 1, "inplace", False))
        self.unary(node, {"type": "SiLU"})

    def sigmoid(self, node: Any) -> None:
        self.unary(node, {"type": "Sigmoid"})

    def tanh(self, node: Any) -> None:
        self.unary(node, {"type": "Tanh"})

    def softmax(self, node: Any) -> None:
        torch = _import_torch()
        dtype_index = 3 if node.target is torch.nn.functional.softmax else 2
        if self._arg(node, dtype_index, "dtype", None) is not None:
            raise ExportError(f"{self._describe(node)}: softmax with a dtype is not supported")
        dim = self._arg(node, 1, "dim", None)
        where = self._describe(node)
        self.unary(node, {"type": "Softmax",
                          "dim": _softmax_dim(dim, self._rank(node.args[0]), where)})

    def dropout(self, node: Any) -> None:
        self.alias(node)

    def flatten(self, node: Any) -> None:
        default_start = 0  # torch.flatten and Tensor.flatten flatten the batch too by default
        start = self._arg(node, 1, "start_dim", default_start)
        end = self._arg(node, 2, "end_dim", -1)
        rank = self._rank(node.args[0])
        if (start % rank) == (end % rank):
            self.alias(node)
            return
        entry = _flatten_entry(start, end, rank, self._describe(node))
        self.unary(node, entry)

    def reshape(self, node: Any) -> None:
        """view / reshape: accepted when it flattens a run of non-batch dims and keeps the batch."""
        source = node.args[0]
        before = self._shape(source)
        after = self._shape(node)
        assert before is not None and after is not None
        if before == after:
            self.alias(node)
            return
        for start in range(1, len(before)):
            for end in range(start + 1, len(before)):
                merged = before[:start] + (math.prod(before[start:end + 1]),) + before[end + 1:]
                if merged == after:
                    rank = len(before)
                    self.unary(node, {"type": "Flatten", "start_dim": start,
                                      "end_dim": -1 if end == rank - 1 else end})
                    return
        raise ExportError(f"{self._describe(node)}: reshaping {before} to {after} is not a "
                          "flatten of non-batch dimensions, the only reshape fusednn supports")

    def add(self, node: Any) -> None:
        if self._arg(node, 2, "alpha", 1) != 1:
            raise ExportError(f"{self._describe(node)}: add with alpha is not supported")
        fx = _import_torch().fx
        left, right = node.args[0], node.args[1]
        if not (isinstance(left, fx.Node) and isinstance(right, fx.Node)
                and self._is_tensor(left) and self._is_tensor(right)):
            raise ExportError(f"{self._describe(node)}: only tensor + tensor is supported "
                              "(adding a constant is not)")
        if self._shape(left) != self._shape(right):
            raise ExportError(f"{self._describe(node)}: adding shapes {self._shape(left)} and "
                              f"{self._shape(right)} needs broadcasting, which Add does not do")
        self._add_layer(node, {"type": "Add"},
                        [self._input(node, left), self._input(node, right)])

    def _scale(self, node: Any, invert: bool) -> None:
        fx = _import_torch().fx
        left, right = node.args[0], node.args[1]
        if isinstance(left, fx.Node) and isinstance(right, (int, float)) and not invert:
            tensor, factor = left, float(right)
        elif isinstance(right, fx.Node) and isinstance(left, (int, float)) and not invert:
            tensor, factor = right, float(left)
        elif isinstance(left, fx.Node) and isinstance(right, (int, float)) and invert:
            if right == 0:
                raise ExportError(f"{self._describe(node)}: division by zero")
            tensor, factor = left, 1.0 / float(right)
        else:
            raise ExportError(f"{self._describe(node)}: only multiplying or dividing a tensor "
                              "by a Python number is supported")
        self._add_layer(node, {"type": "Scale", "alpha": factor}, [self._input(node, tensor)])

    def mul(self, node: Any) -> None:
        self._scale(node, invert=False)

    def div(self, node: Any) -> None:
        if self._arg(node, 2, "rounding_mode", None) is not None:
            raise ExportError(f"{self._describe(node)}: division with rounding is not supported")
        self._scale(node, invert=True)

    def neg(self, node: Any) -> None:
        self.unary(node, {"type": "Scale", "alpha": -1.0})

    def cat(self, node: Any) -> None:
        tensors = self._arg(node, 0, "tensors", None)
        if not isinstance(tensors, (list, tuple)) or not tensors:
            raise ExportError(f"{self._describe(node)}: expected a list of tensors")
        inputs = [self._input(node, t) for t in tensors]
        if len(inputs) == 1:
            self.values[node] = inputs[0]
            return
        dim = self._arg(node, 1, "dim", 0)
        resolved = _normalize_dim(dim, self._rank(node), "concat dim", self._describe(node))
        self._add_layer(node, {"type": "Concat", "dim": resolved}, inputs)

    def max_pool2d(self, node: Any) -> None:
        where = self._describe(node)
        if _pair(self._arg(node, 4, "dilation", 1), "dilation", where) != (1, 1) or \
                self._arg(node, 5, "ceil_mode", False) or \
                self._arg(node, 6, "return_indices", False):
            raise ExportError(f"{where}: max_pool2d dilation / ceil_mode / return_indices are "
                              "not supported")
        entry: Dict[str, Any] = {"type": "MaxPool2d"}
        entry.update(_pool_attributes(self._arg(node, 1, "kernel_size"),
                                      self._arg(node, 2, "stride", None),
                                      self._arg(node, 3, "padding", 0), where))
        self.unary(node, entry)

    def avg_pool2d(self, node: Any) -> None:
        where = self._describe(node)
        if self._arg(node, 4, "ceil_mode", False) or \
                self._arg(node, 6, "divisor_override", None) is not None:
            raise ExportError(f"{where}: avg_pool2d ceil_mode / divisor_override are not "
                              "supported")
        entry: Dict[str, Any] = {"type": "AvgPool2d"}
        entry.update(_pool_attributes(self._arg(node, 1, "kernel_size"),
                                      self._arg(node, 2, "stride", None),
                                      self._arg(node, 3, "padding", 0), where))
        entry["count_include_pad"] = bool(self._arg(node, 5, "count_include_pad", True))
        self.unary(node, entry)


_Handler = Callable[[_FxExporter, Any], None]


def _function_handlers() -> Dict[Any, _Handler]:
    torch = _import_torch()
    F = torch.nn.functional
    table: Dict[Any, _Handler] = {}

    def register(handler: _Handler, *targets: Any) -> None:
        for target in targets:
            table[target] = handler

    register(_FxExporter.relu, F.relu, torch.relu, F.relu_, torch.relu_)
    register(_FxExporter.leaky_relu, F.leaky_relu)
    register(_FxExporter.gelu, F.gelu)
    register(_FxExporter.silu, F.silu)
    register(_FxExporter.sigmoid, torch.sigmoid, F.sigmoid)
    register(_FxExporter.tanh, torch.tanh, F.tanh)
    register(_FxExporter.softmax, F.softmax, torch.softmax)
    register(_FxExporter.dropout, F.dropout, F.dropout1d, F.dropout2d, F.dropout3d,
             F.alpha_dropout, torch.dropout)
    register(_FxExporter.flatten, torch.flatten)
    register(_FxExporter.reshape, torch.reshape)
    register(_FxExporter.add, operator.add, operator.iadd, torch.add)
    register(_FxExporter.mul, operator.mul, operator.imul, torch.mul)
    register(_FxExporter.div, operator.truediv, operator.itruediv, torch.div)
    register(_FxExporter.neg, operator.neg, torch.neg)
    register(_FxExporter.cat, torch.cat, torch.concat, torch.concatenate)
    register(_FxExporter.max_pool2d, F.max_pool2d)
    register(_FxExporter.avg_pool2d, F.avg_pool2d)
    return table


def _method_handlers() -> Dict[str, _Handler]:
    return {
        "relu": _FxExporter.relu,
        "relu_": _FxExporter.relu,
        "sigmoid": _FxExporter.sigmoid,
        "tanh": _FxExporter.tanh,
        "softmax": _FxExporter.softmax,
        "flatten": _FxExporter.flatten,
        "view": _FxExporter.reshape,
        "reshape": _FxExporter.reshape,
        "contiguous": _FxExporter.alias,
        "add": _FxExporter.add,
        "mul": _FxExporter.mul,
        "div": _FxExporter.div,
        "neg": _FxExporter.neg,
    }


def _trace(module: Any, input_shape: Tuple[int, ...]) -> Any:
    torch = _import_torch()
    from torch.fx.passes.shape_prop import ShapeProp

    try:
        graph_module = torch.fx.symbolic_trace(module)
    except Exception as exc:
        raise ExportError(f"torch.fx could not trace {type(module).__name__}: {exc} (forward "
                          "must not branch on tensor values)") from exc
    placeholders = [node for node in graph_module.graph.nodes if node.op == "placeholder"]
    if len(placeholders) != 1:
        raise ExportError(f"the module's forward takes {len(placeholders)} inputs; fusednn "
                          "models take exactly one tensor")
    graph_module.graph.eliminate_dead_code()
    graph_module.recompile()
    # Propagate shapes with two batch sizes: an operation that bakes in the batch (view(2, -1))
    # then shows up as a shape that does not follow the batch.
    shapes: List[Dict[str, Tuple[int, ...]]] = []
    for batch in _SHAPE_PROBE_BATCHES:
        try:
            ShapeProp(graph_module).propagate(_probe(module, batch, input_shape))
        except Exception as exc:
            raise ExportError(f"running {type(module).__name__} on a tensor of shape "
                              f"{(batch,) + input_shape} failed: {exc}") from exc
        propagated: Dict[str, Tuple[int, ...]] = {}
        for node in graph_module.graph.nodes:
            node_shape = _FxExporter._shape(node)
            if node_shape is not None:
                propagated[node.name] = node_shape
        shapes.append(propagated)
    for name, shape in shapes[-1].items():
        first = shapes[0].get(name)
        if not shape or first is None or shape[0] != _SHAPE_PROBE_BATCHES[-1] \
                or first[0] != _SHAPE_PROBE_BATCHES[0] or shape[1:] != first[1:]:
            raise ExportError(f"node '{name}' does not keep the batch as its first dimension "
                              f"(shape {first} for batch {_SHAPE_PROBE_BATCHES[0]}, {shape} for "
                              f"batch {_SHAPE_PROBE_BATCHES[-1]})")
    return graph_module


# ------------------------------------------------------------------------------------------------
# Public functions
# ------------------------------------------------------------------------------------------------


def _checked_input_shape(input_shape: Sequence[int]) -> Tuple[int, ...]:
    try:
        shape = tuple(int(d) for d in input_shape)
    except TypeError:
        raise ExportError(f"input_shape must be a sequence of ints, got {input_shape!r}") from None
    if not shape or any(d <= 0 for d in shape):
        raise ExportError(f"input_shape {input_shape!r} must hold one or more positive extents "
                          "(the per-sample shape, without the batch)")
    return shape


def export_module(module: "torch.nn.Module", input_shape: Sequence[int],
                  name: Optional[str] = None) -> Tuple[Dict[str, Any], Dict[str, "torch.Tensor"]]:
    """Map a module to a fusednn spec and the float32 tensors it reads.

    Args:
        module: An ``nn.Sequential`` or any ``nn.Module`` that ``torch.fx`` can trace.
        input_shape: The per-sample input shape, without the batch (``(1, 28, 28)``).
        name: The model's name in the spec; defaults to the module's class name.

    Returns:
        ``(spec, tensors)``: the spec as a dict, and the weights by state_dict name (contiguous
        float32 CPU tensors that share no storage).

    Raises:
        ExportError: a layer or operation fusednn cannot express, or an input_shape the module
            cannot run on; the message names the module or graph node.
    """
    torch = _import_torch()
    shape = _checked_input_shape(input_shape)
    if not isinstance(module, torch.nn.Module):
        raise ExportError(f"expected a torch.nn.Module, got {type(module).__name__}")
    builder = _SpecBuilder()
    modes = [(submodule, submodule.training) for submodule in module.modules()]
    module.eval()
    try:
        with torch.no_grad():
            leaves = _sequential_leaves(module) if type(module) is torch.nn.Sequential else None
            known = _supported_module_types() + _skipped_module_types()
            if leaves is not None and all(type(leaf) in known for _, leaf in leaves):
                output = _export_sequential(module, leaves, shape, builder)
            else:
                output = _FxExporter(_trace(module, shape), builder).run()
    finally:
        for submodule, training in modes:
            submodule.training = training
    spec = builder.spec(name or type(module).__name__, shape, output)
    return spec, builder.tensors


def spec_from_module(module: "torch.nn.Module", input_shape: Sequence[int],
                     name: Optional[str] = None) -> Dict[str, Any]:
    """The fusednn spec (a JSON-ready dict) of a module; see :func:`export_module`."""
    return export_module(module, input_shape, name)[0]


def save_bundle(module: "torch.nn.Module", path: Union[str, "os.PathLike[str]"],
                input_shape: Sequence[int], name: Optional[str] = None) -> Dict[str, Any]:
    """Write a module as a fusednn bundle (spec + weights in one safetensors file).

    Load it with ``fusednn.Model.from_file(path)``.

    Args:
        module: An ``nn.Sequential`` or any ``nn.Module`` that ``torch.fx`` can trace.
        path: Where to write the ``.safetensors`` file.
        input_shape: The per-sample input shape, without the batch.
        name: The model's name in the spec; defaults to the module's class name.

    Returns:
        The spec that was written, as a dict.

    Raises:
        ExportError: see :func:`export_module`.
    """
    spec, tensors = export_module(module, input_shape, name)
    from safetensors.torch import save_file

    save_file(tensors, os.fspath(path), metadata={SPEC_METADATA_KEY: json.dumps(spec)})
    return spec
