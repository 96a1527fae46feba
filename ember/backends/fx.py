"""IR -> torch.fx: builds the GraphModule a Python backend compiles (the C side exports the
graph as plain data, csrc/runtime/em_rt_python.c) and calls the backend on it.

The GraphModule calls the same torch functions as ember's graph: Python operators become
`operator.*` calls, Tensor methods `call_method` nodes, other callables `call_function`
nodes. Inputs (tensors read from the frame: arguments, parameters, buffers) are placeholders
in input order; constants FX can print stay inline, other constants (tensors included)
become attributes read with get_attr. Every node's meta["val"] (and "example_value", which
some passes read) is a FakeTensor with the node's dtype, shape, strides, device and
requires_grad, made in one FakeTensorMode that the backend finds through the TracingContext,
as it does under TorchDynamo. Outputs are the graph's distinct tensor outputs, as a tuple.
"""
import inspect
import operator
import re

import torch

from .. import _C, _logging, _rules


class BackendCompilerFailed(RuntimeError):
    """A Python backend raised while compiling a graph (the cause is chained)."""


class _Unexportable(Exception):
    """The graph holds something a GraphModule cannot express: it runs on ember's C executor."""


# c10::DeviceType number -> name of the device types ember tracks (csrc/ir/em_devices.def)
_DEVICE_TYPES = _C.DEVICE_TYPES
_LITERAL_TYPES = (bool, int, float, complex, str, type(None), type(Ellipsis), torch.dtype, torch.device,
                  torch.memory_format, torch.layout)


def _is_literal(v, depth=0):
    """Values FX prints as source that evaluates back to them."""
    if type(v) in _LITERAL_TYPES:  # exact types: a subclass may print differently
        return True
    if isinstance(v, slice):
        return all(_is_literal(x, depth + 1) for x in (v.start, v.stop, v.step))
    if isinstance(v, (tuple, list)) and depth < 16 and (type(v) in (tuple, list) or isinstance(v, torch.Size)):
        return all(_is_literal(x, depth + 1) for x in v)
    return False


def _device(dev_type, dev_index):
    name = _DEVICE_TYPES.get(dev_type)
    if name is None:
        raise _Unexportable(f"a tensor on device type {dev_type}")
    return torch.device(name, dev_index) if dev_index >= 0 else torch.device(name)


def _is_module_state(t, label):
    """A graph input that is a module's parameter or buffer (read through its storage dict)."""
    return isinstance(t, torch.nn.Parameter) or "._parameters[" in label or "._buffers[" in label


def _mark_static_inputs(gm):
    """Tells AOTAutograd which inputs are parameters and buffers (static inputs: CUDA graph trees
    keep their addresses instead of copying them into the graph at every replay) the way a
    TorchDynamo graph does: a compile id in the module's meta, a source per placeholder (None:
    ember's guards are its own) and the static mark in each one's `tensor_dict`. Skipped on a torch
    without CompileId."""
    try:
        from torch._guards import CompileId
        cid = CompileId(frame_id=None, frame_compile_id=None)
    except Exception:
        return
    gm.meta["dynamo_compile_id"] = cid
    gm._param_name_to_source = {}


def _placeholder_name(label):
    name = re.sub(r"[^0-9a-zA-Z_]+", "_", label).strip("_") or "input"
    return name if not name[0].isdigit() else "_" + name


def _is_tensor_method(fn):
    name = getattr(fn, "__name__", None)
    return isinstance(name, str) and getattr(torch.Tensor, name, None) is fn


# Calls that make a tensor made in the graph require grad, or stop requiring it: a functional
# backend (AOTAutograd) returns such outputs without requires_grad, as torch.compile would refuse
# them; the graph runs on ember's executor instead, as eager does.
_GRAD_FLAG_SETTERS = (torch.Tensor.requires_grad_, torch.Tensor.detach_)


def _sets_grad_flag(target, kwargs):
    return kwargs.get("requires_grad") is True or any(target is f for f in _GRAD_FLAG_SETTERS)


# What functionalization does not model as eager runs it: out= (which may resize its tensor),
# in-place changes of a tensor's shape or strides, and .data (an alias autograd does not track,
# whose views AOTAutograd replays wrongly).
_METADATA_INPLACE = frozenset(getattr(torch.Tensor, n) for n in (
    "unsqueeze_", "squeeze_", "resize_", "resize_as_", "t_", "transpose_", "swapdims_", "swapaxes_",
    "as_strided_", "set_") if hasattr(torch.Tensor, n))


def _unexportable_call(target, kwargs):
    if "out" in kwargs:
        return "out= (the output tensor may be resized)"
    if target in _METADATA_INPLACE:
        return f"{target.__name__} (changes a tensor's shape in place)"
    if _sets_grad_flag(target, kwargs):
        return (f"{getattr(target, '__name__', target)} makes a tensor of the graph require grad "
                "(a functional backend would return it without requires_grad)")
    return None


_AUTOCAST_SIG = inspect.signature(torch.autocast.__init__)
# in-place operator op -> the op it is the in-place form of ("iadd" -> "add"; csrc/ir/em_ops.def)
_INPLACE = {name: binary for name, _py, binary in _C.OPS if binary is not None}


def _graph_op(name):
    """The callable an IR op stands for: Python's operator for operator ops."""
    fn = _rules.OP_FNS.get(name)
    if fn is None:
        raise _Unexportable(f"op {name!r}")
    return fn


class _Builder:
    def __init__(self, desc, inputs, fake_mode):
        self.nodes, self.outputs = desc
        self.inputs = inputs
        self.fake_mode = fake_mode
        self.graph = torch.fx.Graph()
        self.root = torch.nn.Module()
        self.env = {}
        self.n_consts = 0
        self.n_ops = 0

    def fake(self, meta):
        dtype_num, dev_type, dev_index, requires_grad, sizes, strides = meta
        with self.fake_mode:
            t = torch.empty_strided(sizes, strides, dtype=_rules._DTYPES[dtype_num],
                                    device=_device(dev_type, dev_index))
        return t.requires_grad_(bool(requires_grad)) if requires_grad else t

    def const(self, v):
        if _is_literal(v):
            return v
        name = f"_ember_const_{self.n_consts}"
        self.n_consts += 1
        if isinstance(v, torch.Tensor):
            self.root.register_buffer(name, v, persistent=False)
        else:
            object.__setattr__(self.root, name, v) if not isinstance(v, torch.nn.Module) else \
                self.root.add_module(name, v)
        node = self.graph.get_attr(name)
        if isinstance(v, torch.Tensor):
            node.meta["val"] = node.meta["example_value"] = self.fake_mode.from_tensor(v, static_shapes=True)
        return node

    def arg(self, a):
        tag, x = a
        if tag == 0:
            return self.env[x]
        if tag == 1:
            return self.const(x)
        items = [self.arg(c) for c in x]
        return tuple(items) if tag == 2 else items

    def build(self):
        g = self.graph
        # placeholders first, in input order (the order of example_inputs)
        inputs = sorted((target[0], ref, target[1]) for ref, (op, target, *_rest) in enumerate(self.nodes)
                        if op == "input")
        for number, ref, label in inputs:
            node = g.placeholder(_placeholder_name(label))
            real = self.inputs[number]
            if not isinstance(real, torch.Tensor):
                raise _Unexportable(f"input {label} is not a tensor")
            node.meta["val"] = node.meta["example_value"] = self.fake_mode.from_tensor(real, static_shapes=True)
            node._dynamo_source = None
            if _is_module_state(real, label):  # a parameter or buffer: its address is stable
                node.meta["tensor_dict"] = {"_dynamo_static_input_type": "unguarded"}
            self.env[ref] = node
        seq_items = {}
        for ref, (op, target, args, kwnames, vkind, meta) in enumerate(self.nodes):
            if op == "input":
                continue
            node = self.node(op, target, args, kwnames, vkind)
            if meta is not None:
                node.meta["val"] = node.meta["example_value"] = self.fake(meta)
            if op == "item":
                seq_items.setdefault(args[0][1], {})[target] = node.meta.get("val")
            self.env[ref] = node
        for ref, items in seq_items.items():  # a sequence result: the fakes of its items
            val = tuple(items.get(i) for i in range(max(items) + 1))
            self.env[ref].meta["val"] = self.env[ref].meta["example_value"] = val
        for ref in self.outputs:
            if self.nodes[ref][4] != 0:
                raise _Unexportable("a graph output that is not a tensor")
        g.output(tuple(self.env[r] for r in self.outputs))
        gm = torch.fx.GraphModule(self.root, g, class_name="EmberGraph")
        _mark_static_inputs(gm)
        return gm

    def context(self, target, args):
        """enter_ctx(spec) / exit_ctx(entered) of a with block other than grad mode: autocast
        becomes torch.amp._enter_autocast/_exit_autocast, as TorchDynamo writes it."""
        if target is _rules.exit_ctx:
            return self.graph.call_function(torch.amp._exit_autocast, (self.arg(args[0]),))
        cls, cargs, ckw = args[0][1]
        if cls is not torch.autocast:
            raise _Unexportable(f"a with block of {getattr(cls, '__name__', cls)} (only grad mode and autocast are)")
        bound = _AUTOCAST_SIG.bind(None, *cargs, **dict(ckw))
        bound.apply_defaults()
        vals = tuple(bound.arguments[k] for k in ("device_type", "dtype", "enabled", "cache_enabled"))
        if not _is_literal(vals):
            raise _Unexportable("torch.autocast with arguments FX cannot print")
        return self.graph.call_function(torch.amp._enter_autocast, vals)

    def node(self, op, target, args, kwnames, vkind):
        g = self.graph
        if op == "call" and target in (_rules.enter_ctx, _rules.exit_ctx):
            return self.context(target, args)
        vals = [self.arg(a) for a in args]
        nkw = len(kwnames) if kwnames else 0
        pos, kwargs = vals[:len(vals) - nkw], dict(zip(kwnames or (), vals[len(vals) - nkw:]))
        if vkind == 2:  # an object result: not a tensor program
            raise _Unexportable(f"a call of {getattr(target, '__name__', target)!r} returning an object")
        if op == "call":
            if target is _rules.set_grad_enabled:
                return g.call_function(torch._C._set_grad_enabled, tuple(pos))
            why = _unexportable_call(target, kwargs)
            if why:
                raise _Unexportable(why)
            self.n_ops += 1
            if _is_tensor_method(target):
                return g.call_method(target.__name__, tuple(pos), kwargs)
            return g.call_function(target, tuple(pos), kwargs)
        self.n_ops += 1
        if op == "getattr":
            if target == "data":
                raise _Unexportable(".data (an alias autograd does not track)")
            return g.call_function(getattr, (pos[0], target))
        if op == "item":
            return g.call_function(operator.getitem, (pos[0], target))
        if op in _INPLACE and not isinstance(pos[0], torch.fx.Node):
            op = _INPLACE[op]  # `c += t` on a Python constant is `c + t` (FX would print `0 += t`)
        return g.call_function(_graph_op(op), tuple(pos), kwargs)


def _untracked_alias(inputs):
    """Two tensor inputs sharing storage without being views of one base (x and x.data, tensors
    made with set_ or from one numpy array): AOTAutograd replays views of either wrongly after a
    mutation, so such a graph runs on ember's executor. The name of the case, or None."""
    bases = {}
    for t in inputs:
        if not isinstance(t, torch.Tensor) or t.layout != torch.strided or t.device.type == "meta":
            continue
        try:
            ptr = t.untyped_storage().data_ptr()
        except Exception:  # tensor subclasses without a storage
            continue
        if ptr == 0:
            continue
        base = t._base if t._base is not None else t
        prev = bases.setdefault(ptr, base)
        if prev is not base:
            return "two inputs share storage without being views of one tensor (such as x and x.data)"
    return None


def _self_overlap_mutated(gm, inputs):
    """An input whose elements share memory (an expand) in a graph with in-place ops: AOTAutograd
    writes mutated inputs back whole, which such a tensor refuses. The name of the case, or None."""
    def mutates(n):
        if n.op == "call_method":
            return n.target.endswith("_")
        name = getattr(n.target, "__name__", "") if n.op == "call_function" else ""
        return name.endswith("_") or name in _INPLACE
    if not any(mutates(n) for n in gm.graph.nodes):
        return None
    for t in inputs:
        if isinstance(t, torch.Tensor) and t.layout == torch.strided and t.device.type != "meta" and \
                torch._debug_has_internal_overlap(t) == 1:
            return "an input whose elements share memory (such as an expand) in a graph with in-place ops"
    return None


def build_graph_module(desc, inputs, fake_mode):
    """(GraphModule, number of ops) for an exported graph and its real inputs."""
    b = _Builder(desc, inputs, fake_mode)
    gm = b.build()
    return gm, b.n_ops


def _warn_executor(where, backend, reason, internal=False):
    """Says once per reason that the graph of `where` runs on ember's executor, not the backend."""
    if "breaks" in _logging.enabled:
        _logging.log("breaks", f"the graph of {where} runs on ember's eager executor, not backend "
                               f"{backend.name!r}: {reason}")
    m = re.match(r"^(.*) \((.*):(\d+)\)$", str(where))
    what = f"`{m.group(1)}` ({_logging._short(m.group(2))}:{m.group(3)})" if m else str(where)
    _logging.user_warning(
        f"ember could not hand a graph of {what} to backend {backend.name!r}"
        f"{' because of an internal error' if internal else ''}; it runs on ember's eager executor instead. "
        f"Set EMBER_LOGS=breaks for details{' (and please report them)' if internal else ''}.",
        key=("backend", backend.name, reason))


def _autocast_key_fixed():
    """Whether AOTAutograd's cache key holds the autocast dtype per device (newer torch): an older
    one reuses a graph compiled under bfloat16 autocast for float16 autocast (torch 2.11)."""
    try:
        from torch._functorch._aot_autograd.autograd_cache import AOTAutogradCacheDetails
    except ImportError:
        return True  # no such cache
    return any("autocast_state" in f.__code__.co_names for f in vars(AOTAutogradCacheDetails).values()
               if hasattr(f, "__code__"))


_AUTOCAST_IN_CACHE_KEY = _autocast_key_fixed()


def _autocast_on():
    return any(torch.is_autocast_enabled(d) for d in ("cpu", "cuda"))


def compile_graph(backend, desc, inputs, where):
    """Called by the C runtime at a graph's first call: returns (compiled callable, FX code),
    or (None, reason) when the graph runs on ember's C executor instead."""
    from torch._guards import TracingContext, tracing
    from torch._subclasses.fake_tensor import FakeTensorMode
    from torch.fx.experimental.symbolic_shapes import ShapeEnv

    # a ShapeEnv as under TorchDynamo (Inductor's and AOTAutograd's on-disk caches need one);
    # every fake value is made with static shapes
    fake_mode = FakeTensorMode(shape_env=ShapeEnv())
    try:
        alias = _untracked_alias(inputs)
        if alias:
            raise _Unexportable(alias)
        gm, n_ops = build_graph_module(desc, inputs, fake_mode)
        overlap = _self_overlap_mutated(gm, inputs)
        if overlap:
            raise _Unexportable(overlap)
    except Exception as e:  # ember's own limits (or an internal error): never the user's problem
        internal = not isinstance(e, _Unexportable)
        reason = f"internal error exporting to torch.fx: {type(e).__name__}: {e}" if internal else \
            f"not exported to torch.fx: {e}"
        _warn_executor(where, backend, reason, internal)
        return None, reason
    if n_ops == 0:
        return None, "no operations (nothing to compile)"
    code = gm.code
    if "graph" in _logging.enabled:
        _logging.log("graph", f"torch.fx graph of {where} for backend {backend.name!r}:\n{code.strip()}")
    try:
        # AOTAutograd compiles the backward now rather than at the first backward, which may run
        # inside code ember intercepts (TorchDynamo runs that lazy compile under its `disable`)
        # A backward compiled before it runs cannot know whether it runs with retain_graph=True,
        # which donated buffers refuse (torch.compile's lazy backward turns them off then): they
        # are switched off for the process (memory only; torch's check reads the flag at run time)
        torch._functorch.config.donated_buffer = False
        patch = dict(force_non_lazy_backward_lowering=True)
        if _autocast_on() and not _AUTOCAST_IN_CACHE_KEY:
            patch["enable_autograd_cache"] = False  # its key would not tell bfloat16 autocast from float16
        with tracing(TracingContext(fake_mode)), torch._functorch.config.patch(**patch):
            fn = backend.compiler(gm, list(inputs))
    except RuntimeError as e:
        if "modified by an inplace operation" not in str(e):
            raise BackendCompilerFailed(f"ember: backend {backend.name!r} failed to compile the graph of {where}: "
                                        f"{type(e).__name__}: {e}") from e
        # the backward, compiled with the forward here (lazily under torch.compile), cannot be
        # built; eager raises only if a backward runs: so does ember's executor
        reason = f"its backward cannot be compiled ({e})"
        _warn_executor(where, backend, reason)
        return None, reason
    except Exception as e:
        raise BackendCompilerFailed(f"ember: backend {backend.name!r} failed to compile the graph of {where}: "
                                    f"{type(e).__name__}: {e}") from e
    if not callable(fn):
        raise BackendCompilerFailed(f"ember: backend {backend.name!r} returned {type(fn).__name__} for the graph "
                                    f"of {where}, not a callable")
    return fn, code
