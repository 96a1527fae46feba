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
import math
import operator
import re
import warnings

import torch

from .. import _C, _logging, _rules


class BackendCompilerFailed(RuntimeError):
    """A Python backend raised while compiling a graph (the cause is chained)."""


class _Unexportable(Exception):
    """The graph holds something a GraphModule cannot express: it runs on ember's C executor."""


class _NeedsStatic(Exception):
    """The graph cannot be exported with symbolic inputs (a nan or infinite float input, which the
    ShapeEnv cannot model): a variant for the inputs as they are is exported instead."""


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


def _leaf_dtype(e):
    """The dtype torch.tensor infers for one item of its data."""
    if isinstance(e, torch.Tensor):
        return e.dtype
    if isinstance(e, (bool, torch.SymBool)):
        return torch.bool
    if isinstance(e, (int, torch.SymInt)):
        return torch.int64
    if isinstance(e, complex):
        return torch.complex128 if torch.get_default_dtype() == torch.float64 else torch.complex64
    return torch.get_default_dtype()


def _tensor_of_data(data, dtype=None, device=None, requires_grad=False, pin_memory=False):
    """torch.tensor(data) for data (lists/tuples) holding 0-dim tensors or numbers of the graph: the items
    cast and stacked, ops AOTAutograd traces (torch.tensor reads each item's value). The dtype
    torch.tensor infers (its items' promoted); the device given or the default one; no autograd
    history, as torch.tensor's copy has none."""
    def leaves(d):
        return [x for i in d for x in leaves(i)] if isinstance(d, (list, tuple)) else [d]

    if dtype is None:
        items = leaves(data)
        dtype = _leaf_dtype(items[0])
        for e in items[1:]:
            dtype = torch.promote_types(dtype, _leaf_dtype(e))
    dev = torch.device(device) if device is not None else torch.get_default_device()

    def build(d):
        if isinstance(d, (list, tuple)):
            return torch.stack([build(i) for i in d])
        if isinstance(d, torch.Tensor):
            return d.detach().to(device=dev, dtype=dtype).reshape(())
        if isinstance(d, (torch.SymInt, torch.SymFloat, torch.SymBool)):  # a number from x.item()
            return torch.scalar_tensor(d, dtype=dtype, device=dev)
        return torch.tensor(d, dtype=dtype, device=dev)

    out = build(data)
    return out.requires_grad_() if requires_grad else out


def _has_node(v):
    if isinstance(v, (list, tuple)):
        return any(_has_node(i) for i in v)
    return isinstance(v, torch.fx.Node)


def _cond_fx(pred, true_fn, false_fn, operands, true_cells=(), false_cells=()):
    """A cond op (_rules.cond_call) for AOTAutograd: torch.ops.higher_order.cond over branches
    that return their results flat; the tensors their cells hold are lifted into operands (each
    branch takes them all, made again around its own)."""
    import torch.utils._pytree as pytree
    spec = []
    n = len(operands)
    lifted = []  # each tensor once (cond refuses operands that alias each other)
    for c in tuple(true_cells) + tuple(false_cells):
        if isinstance(c, torch.Tensor) and not any(c is t for t in lifted):
            lifted.append(c)

    def flat(fn, cells):
        at = [next(i for i, t in enumerate(lifted) if t is c) if isinstance(c, torch.Tensor) else -1 for c in cells]

        def branch(*args):
            vals = [args[n + a] if a >= 0 else c for a, c in zip(at, cells)]
            leaves, s = pytree.tree_flatten(_rules.with_cells(fn, vals)(*args[:n]))
            spec[:] = [s]
            return tuple(leaves)
        return branch

    leaves = torch.ops.higher_order.cond(pred, flat(true_fn, true_cells), flat(false_fn, false_cells),
                                         tuple(operands) + tuple(lifted))
    return pytree.tree_unflatten(list(leaves), spec[0])


# errors of a backward AOTAutograd builds with the forward, which eager raises only if a backward runs
_BACKWARD_ONLY_ERRORS = ("modified by an inplace operation", "but the corresponding forward input was not a Variable")


def _has_numbers(gm):
    """Whether the graph computes numbers from x.item() (unbacked symbols a backend may refuse)."""
    return any(n.op == "call_method" and n.target == "item" for n in gm.graph.nodes)


def _has_cond(gm):
    return any(n.op == "call_function" and n.target is _cond_fx for n in gm.graph.nodes)


# callables whose FX form is another function when a graph value is among their data
_FX_FORMS = {torch.tensor: _tensor_of_data}


def _graph_op(name):
    """The callable an IR op stands for: Python's operator for operator ops."""
    fn = _rules.OP_FNS.get(name)
    if fn is None:
        raise _Unexportable(f"op {name!r}")
    return fn


# int-valued nodes of a graph with symbolic sizes (x.size(d), int arithmetic): SymInts in FX;
# min/max of sizes are torch's symbolic forms (builtins' would compare, which guards)
_INT_OPS = frozenset(("input", "add", "mul", "floordiv", "mod"))
_SYM_CALLS = {torch.Tensor.size: torch.Tensor.size, min: torch.sym_min, max: torch.sym_max}


def _is_int_node(op, target):
    return op in _INT_OPS or (op == "call" and target in _SYM_CALLS)


# numbers the graph computes (x.item(), csrc/trace/em_sym_item.c): SymInts, SymFloats and SymBools
# of the fake run (unbacked), which these calls take in their symbolic forms
def _check(cond):
    """torch._check(cond) as a node the backend keeps: on an unbacked SymBool torch._check only
    defers an assert in the fake run's ShapeEnv, which the backend's graph drops (TorchDynamo
    inserts these _assert_scalar nodes itself: insert_deferred_runtime_asserts)."""
    torch.ops.aten._assert_scalar.default(cond, "Expected cond to be True, but got False.")


def _check_is_size(n):  # its runtime part (torch deprecates the size-like mark; ember makes no size of n)
    _check(n >= 0)


_NUMBER_CALLS = {int: torch.sym_int, float: torch.sym_float, abs: abs, round: round, math.floor: math.floor,
                 math.ceil: math.ceil, math.trunc: math.trunc, torch._check: _check,
                 torch._check_is_size: _check_is_size}
_NUMBER_OPS = frozenset(("add", "sub", "mul", "truediv", "floordiv", "mod", "pow", "and", "or", "xor", "lshift",
                         "rshift", "neg", "pos", "invert", "lt", "le", "eq", "ne", "gt", "ge"))


# ember's size expressions and relations (csrc/trace/em_sym_int.c, size_program) on SymInts
_SIZE_OPS = {"add": operator.add, "mul": operator.mul, "floordiv": operator.floordiv, "mod": operator.mod,
             "min": torch.sym_min, "max": torch.sym_max}
_SIZE_CMPS = {"==": operator.eq, "!=": operator.ne, "<": operator.lt, "<=": operator.le, ">": operator.gt,
              ">=": operator.ge}


class _SymbolicInputs:
    """The fakes of a graph's inputs when some sizes are symbolic (the C side's
    em_trace_input_syms: per input a tuple of symbol numbers per dimension, -1 static, or one
    number for an int input). A dimension with a symbol is DUCK in the ShapeEnv: dimensions of
    equal size share a symbol, as ember's do (checked: a ShapeEnv symbol standing for two of
    ember's would assume an equality ember's guards do not check); an int is a SymInt of its
    own (ember does not duck-size ints)."""

    def __init__(self, fake_mode, in_syms, float_inputs=True):
        self.fake_mode = fake_mode
        self.in_syms = in_syms
        self.float_inputs = float_inputs  # False: a float input makes the export a static variant
        self.ember_of = {}  # ShapeEnv symbol -> ember symbol number
        self.symint = {}  # ember symbol number -> its SymInt
        self.symfloat = {}  # input number -> the SymFloat of a float input
        self.float_real = {}  # input number -> the float64 tensor of a float input

    def assume(self, exprs, rels):
        """Tells the ShapeEnv the relations ember's guards check (x.size(1) == w.size(0) of a
        matmul, a branch's x.size(0) > 4), so that the backend's tracing finds them known
        instead of assuming them anew (each new assumption is checked at every call).
        Relations over symbols that are not the inputs' are left out."""
        vals = []
        for op, a, b, v in exprs:  # operands come before their expression
            if op == "const":
                vals.append(v)
            elif op == "sym":
                vals.append(self.symint.get(a))
            else:
                x, y = vals[a], vals[b]
                vals.append(None if x is None or y is None else _SIZE_OPS[op](x, y))
        for cmp, lhs, rhs in rels:
            x, y = vals[lhs], vals[rhs]
            if x is None or y is None or not (isinstance(x, torch.SymInt) or isinstance(y, torch.SymInt)):
                continue
            torch._check(_SIZE_CMPS[cmp](x, y))

    def float_input(self, number, real, source):
        """A float input, as TorchDynamo passes one: a float64 0-dim tensor (the fake returned),
        whose .item() in the graph is a SymFloat of its own (self.symfloat[number])."""
        import math
        from torch._dynamo.source import FloatTensorSource
        if math.isnan(real) or math.isinf(real):
            raise _NeedsStatic(f"input {number} is {real}")
        if not self.float_inputs:  # CUDA graphs take no CPU scalar tensor (TorchDynamo specializes there too)
            raise _NeedsStatic(f"input {number} is a float, which the backend's CUDA graphs take as a constant")
        t = torch.tensor(real, dtype=torch.float64)
        val = self.fake_mode.from_tensor(t, source=FloatTensorSource(source))
        if not isinstance(getattr(val, "item_memo", None), torch.SymFloat):
            raise _NeedsStatic(f"input {number}: the fake mode made no SymFloat of {real}")
        self.symfloat[number] = val.item_memo
        self.float_real[number] = t  # the backend's example input: its fake is val (the fake mode's memo)
        return val

    def fake(self, number, real):
        from torch._dynamo.source import ConstantSource
        from torch.fx.experimental.symbolic_shapes import DimDynamic, StatelessSymbolicContext
        syms = self.in_syms[number]
        source = ConstantSource(f"ember_input_{number}")
        shape_env = self.fake_mode.shape_env
        if not isinstance(real, torch.Tensor):
            if type(real) not in (int, float):
                raise _Unexportable(f"input {number} is a {type(real).__name__}, not a tensor, an int or a float")
            if syms == -1:  # a static variant's (_static_desc): the value, checked per call
                return real
            if type(real) is float:
                return self.float_input(number, real, source)
            # a SymInt of its own even when pinned (None): a plain int would be duck-sized by
            # AOTAutograd with an equal tensor size, an equality ember's guards do not check
            sym = shape_env.create_symbol(real, source, dynamic_dim=DimDynamic.DYNAMIC)
            val = shape_env.create_symintnode(sym, hint=real, source=source)
            if isinstance(syms, int):
                self.symint.setdefault(syms, val)
            return val
        if not isinstance(syms, tuple) or all(k < 0 for k in syms):
            return self.fake_mode.from_tensor(real, static_shapes=True)
        if len(syms) != real.dim():
            raise RuntimeError(f"input {number}: {len(syms)} symbols for a {real.dim()}-d tensor")
        ctx = StatelessSymbolicContext(
            dynamic_sizes=[DimDynamic.DUCK if k >= 0 else DimDynamic.STATIC for k in syms],
            constraint_sizes=[None] * len(syms))
        val = self.fake_mode.from_tensor(real, symbolic_context=ctx, source=source)
        for k, size in zip(syms, val.shape):
            if k < 0:
                continue
            if not isinstance(size, torch.SymInt):
                raise _Unexportable(f"input {number}: a dynamic dimension the ShapeEnv made static")
            if self.ember_of.setdefault(size.node.expr, k) != k:
                raise _Unexportable("the ShapeEnv gave two of ember's size symbols one symbol")
            self.symint.setdefault(k, size)
        return val


class _Builder:
    def __init__(self, desc, inputs, fake_mode, float_inputs=True):
        self.float_inputs = float_inputs
        self.nodes, self.outputs, *syms = desc  # (nodes, outputs[, None or (in_syms, (exprs, relations))])
        self.in_syms, self.size_prog = syms[0] if syms and syms[0] is not None else (None, None)
        self.inputs = inputs
        self.fake_mode = fake_mode
        self.placeholder_vals = []  # per placeholder: its fake (a FakeTensor or a SymInt)
        self.sym_args, self.sym_vals = [], []  # the size placeholders (size_placeholders)
        self.float_args = []  # placeholders that take a float as a float64 tensor (float_items)
        self.check_vals = []  # placeholder_vals, but a float input's SymFloat for its tensor
        self.float_examples = []  # per float_args: the float64 tensor faked for it
        self.graph = torch.fx.Graph()
        self.root = torch.nn.Module()
        self.vmap_levels = set()  # the FX nodes entering a vmap level (context)
        self.env = {}
        self.numbers = set()  # refs of the nodes computing numbers (is_number)
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
        syms = _SymbolicInputs(self.fake_mode, self.in_syms, self.float_inputs) if self.in_syms is not None else None
        self.input_refs = [ref for _number, ref, _label in inputs]
        for number, ref, label in inputs:
            node = g.placeholder(_placeholder_name(label))
            real = self.inputs[number]
            if syms is not None:
                val = syms.fake(number, real)
            elif isinstance(real, torch.Tensor):
                val = self.fake_mode.from_tensor(real, static_shapes=True)
            else:
                raise _Unexportable(f"input {label} is not a tensor")
            node.meta["val"] = node.meta["example_value"] = val
            self.placeholder_vals.append(val)
            node._dynamo_source = None
            if _is_module_state(real, label):  # a parameter or buffer: its address is stable
                node.meta["tensor_dict"] = {"_dynamo_static_input_type": "unguarded"}
            self.env[ref] = node
        if syms is not None:
            self.size_placeholders(syms)
            self.float_items(syms, inputs)
        seq_items = {}
        for ref, (op, target, args, kwnames, vkind, meta) in enumerate(self.nodes):
            if op == "input":
                continue
            number = vkind == 2 and self.is_number(op, target, args)
            if number:
                self.numbers.add(ref)
            node = self.node(op, target, args, kwnames, vkind, number)
            if meta is not None and syms is None:
                node.meta["val"] = node.meta["example_value"] = self.fake(meta)
            if op == "item":
                seq_items.setdefault(args[0][1], {})[target] = node.meta.get("val")
            self.env[ref] = node
        if syms is None:
            for ref, items in seq_items.items():  # a sequence result: the fakes of its items
                val = tuple(items.get(i) for i in range(max(items) + 1))
                self.env[ref].meta["val"] = self.env[ref].meta["example_value"] = val
        for ref in self.outputs:
            op, target, *_rest, vkind, _meta = self.nodes[ref]
            if vkind != 0 and ref not in self.numbers and not (syms is not None and _is_int_node(op, target)):
                raise _Unexportable("a graph output that is not a tensor")
        g.output(tuple(self.env[r] for r in self.outputs))
        gm = torch.fx.GraphModule(self.root, g, class_name="EmberGraph")
        _mark_static_inputs(gm)
        if syms is not None:
            syms.assume(*self.size_prog)
            # the ShapeEnv's guards from here on are the backend's own assumptions
            gm.meta["ember_assumed_guards"] = len(self.fake_mode.shape_env.guards)
            self.propagate(gm)
        return gm

    def float_items(self, syms, inputs):
        """After the placeholders: x.item() of each float input's tensor, which the graph's ops
        take (Inductor's tensorify pass turns them into tensor ops, AOTAutograd's keep the
        SymFloat). self.float_args: the placeholder positions whose value is a float64 tensor."""
        self.check_vals = list(self.placeholder_vals)
        if not syms.symfloat:
            return
        last = self.graph.find_nodes(op="placeholder")[-1]
        nsym = len(self.sym_args)
        for i, (number, ref, _label) in enumerate(inputs):
            if number not in syms.symfloat:
                continue
            with self.graph.inserting_after(last):
                node = self.graph.call_method("item", (self.env[ref],))
            last = node
            node.meta["val"] = node.meta["example_value"] = syms.symfloat[number]
            self.env[ref] = node
            self.float_args.append(nsym + i)
            self.check_vals[nsym + i] = syms.symfloat[number]
            self.float_examples.append(syms.float_real[number])

    def size_placeholders(self, syms):
        """A SymInt placeholder per symbol of the tensor inputs' sizes, before the inputs, as
        TorchDynamo lifts them (AOTAutograd's and Inductor's passes find each symbol bound to a
        graph value): self.sym_args says where the caller reads each one, (input, dim)."""
        firsts = self.graph.find_nodes(op="placeholder")
        if not firsts:
            return
        ints = {k for k in self.in_syms if isinstance(k, int) and k >= 0}
        done = set(ints)
        for number, dims in enumerate(self.in_syms):
            if not isinstance(dims, tuple):
                continue
            for d, k in enumerate(dims):
                if k < 0 or k in done:
                    continue
                done.add(k)
                with self.graph.inserting_before(firsts[0]):
                    node = self.graph.placeholder(f"s{k}")
                node.meta["val"] = node.meta["example_value"] = syms.symint[k]
                node._dynamo_source = None
                self.sym_args.append((number, d))
                self.sym_vals.append(syms.symint[k])
        self.placeholder_vals[:0] = self.sym_vals

    def propagate(self, gm):
        """meta["val"] of every node of a graph with symbolic sizes, by running it on the fakes;
        each tensor's sizes, when the inputs have the traced sizes, must be the traced ones (the
        graph's first call may come with other sizes: another thread's, a variant's)."""
        hints = {a: v for op, a, _b, v in self.size_prog[0] if op == "sym"}
        traced = all(tuple(real.shape) == tuple(self.nodes[ref][5][4]) if isinstance(real, torch.Tensor) else
                     type(real) is float or isinstance(k, int) and hints.get(k) == real
                     for ref, real, k in zip(self.input_refs, self.inputs, self.in_syms))
        from torch.fx.passes.fake_tensor_prop import FakeTensorProp
        from torch._dispatch.python import enable_python_dispatcher
        # as TorchDynamo runs ops on fakes: composite kernels take SymInts through the Python
        # dispatcher (sdpa on CUDA pads with constant_pad_nd, whose C++ kernel wants ints)
        with enable_python_dispatcher():
            FakeTensorProp(gm, self.fake_mode).propagate_dont_convert_inputs(*self.placeholder_vals)
        gm.meta["ember_sym_args"] = tuple(self.sym_args)
        gm.meta["ember_float_args"] = tuple(self.float_args)
        gm.meta["ember_float_examples"] = self.float_examples
        gm.meta["ember_check_vals"] = self.check_vals
        by_node = {node: ref for ref, node in self.env.items() if isinstance(node, torch.fx.Node)}
        for node, val in zip(gm.graph.find_nodes(op="placeholder"), self.placeholder_vals):
            node.meta["val"] = val  # the fakes themselves (FakeTensorProp put copies): the fake mode's
            # memo holds them weakly, and AOTAutograd finds the symbolic fake of an input there
        for node in gm.graph.nodes:
            val = node.meta.get("val")
            node.meta["example_value"] = val
            meta = self.nodes[by_node[node]][5] if node in by_node else None
            if meta is None or not isinstance(val, torch.Tensor) or not traced:
                continue
            hints = tuple(s.node.hint if isinstance(s, torch.SymInt) else s for s in val.shape)
            if None in hints:  # a size from .item() (unbacked): the trace had a stand-in
                hints = tuple(meta[4][i] if h is None else h for i, h in enumerate(hints))
            if hints != tuple(meta[4]):
                raise RuntimeError(f"{node.format_node()}: sizes {hints} where the trace had {tuple(meta[4])}")

    def context(self, target, args):
        """enter_ctx(spec) / exit_ctx(entered) of a with block other than grad mode: autocast
        becomes torch.amp._enter_autocast/_exit_autocast, a vmap level
        _vmap_increment_nesting/_vmap_decrement_nesting, as TorchDynamo writes them."""
        if target is _rules.exit_ctx:
            entered = self.arg(args[0])
            if entered is None:  # a catch_warnings or sdpa_kernel block: not in the FX graph
                return None
            if entered in self.vmap_levels:
                return self.graph.call_function(_rules._predispatch._vmap_decrement_nesting, ())
            return self.graph.call_function(torch.amp._exit_autocast, (entered,))
        cls, cargs, ckw = args[0][1]
        if cls is warnings.catch_warnings:  # the compiled kernels give no warnings to filter
            return None
        if cls is getattr(getattr(torch.nn, "attention", None), "sdpa_kernel", None):
            return None  # the backend's own attention kernels run (its lowering picks them)
        if cls in _rules._FUNCTORCH_CTX:  # a vmap level, as TorchDynamo writes it
            bound = inspect.signature(cls).bind(*cargs, **dict(ckw))
            vals = (bound.arguments["batch_size"], bound.arguments["randomness"])
            if not _is_literal(vals):
                raise _Unexportable("a vmap level with arguments FX cannot print")
            level = self.graph.call_function(_rules._predispatch._vmap_increment_nesting, vals)
            self.vmap_levels.add(level)
            return level
        if cls is not torch.autocast:
            raise _Unexportable(f"a with block of {getattr(cls, '__name__', cls)} (only grad mode and autocast are)")
        bound = _AUTOCAST_SIG.bind(None, *cargs, **dict(ckw))
        bound.apply_defaults()
        vals = tuple(bound.arguments[k] for k in ("device_type", "dtype", "enabled", "cache_enabled"))
        if not _is_literal(vals):
            raise _Unexportable("torch.autocast with arguments FX cannot print")
        return self.graph.call_function(torch.amp._enter_autocast, vals)

    def is_number(self, op, target, args):
        """Whether the node computes a number from x.item(): the item, or arithmetic on one."""
        if op == "call" and target is torch._C.TensorBase.item:
            self.fake_mode.allow_scalar_outputs = True  # the fake item is an unbacked symbol
            return True
        on_number = any(tag == 0 and x in self.numbers for tag, x in args)
        return on_number and (op in _NUMBER_OPS or (op == "call" and target in _NUMBER_CALLS))

    def node(self, op, target, args, kwnames, vkind, number=False):
        g = self.graph
        if number:
            pos = tuple(self.arg(a) for a in args)
            self.n_ops += 1
            if op == "call":
                return g.call_method("item", pos) if target is torch._C.TensorBase.item else \
                    g.call_function(_NUMBER_CALLS[target], pos)
            return g.call_function(_graph_op(op), pos)
        if op == "call" and target in (_rules.enter_ctx, _rules.exit_ctx):
            return self.context(target, args)
        if op == "call" and target is _rules.call_spec:  # a warnings filter of a catch_warnings block
            return None
        vals = [self.arg(a) for a in args]
        nkw = len(kwnames) if kwnames else 0
        pos, kwargs = vals[:len(vals) - nkw], dict(zip(kwnames or (), vals[len(vals) - nkw:]))
        if op == "call" and target is slice and vkind == 2 and not kwargs:  # x[:n] of a symbolic n
            return slice(*pos)  # an argument of the getitem node (FX maps the nodes inside it)
        if vkind == 2 and not (self.in_syms is not None and _is_int_node(op, target)):  # not a tensor program
            raise _Unexportable(f"a call of {getattr(target, '__name__', target)!r} returning an object")
        if op == "call" and vkind == 2 and target in _SYM_CALLS:
            self.n_ops += 1
            if target is torch.Tensor.size:
                return g.call_method("size", tuple(pos))
            return g.call_function(_SYM_CALLS[target], tuple(pos))
        if op == "call":
            if target is _rules.set_grad_enabled:
                return g.call_function(torch._C._set_grad_enabled, tuple(pos))
            why = _unexportable_call(target, kwargs)
            if why:
                raise _Unexportable(why)
            self.n_ops += 1
            if _is_tensor_method(target):
                return g.call_method(target.__name__, tuple(pos), kwargs)
            number_data = pos and isinstance(pos[0], torch.fx.Node) and any(self.env[r] is pos[0] for r in self.numbers)
            if target in _FX_FORMS and pos and (number_data or isinstance(pos[0], (list, tuple)) and _has_node(pos[0])):
                target = _FX_FORMS[target]
            elif target is _rules.cond_call:
                target = _cond_fx
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


# functional-looking ops that write an argument: batch norm's running statistics (training)
_WRITES_ARGS = {"batch_norm", "instance_norm", "native_batch_norm", "_native_batch_norm_legit"}


def _has_inplace(gm):
    """The graph has an in-place op (one that may write into an input): a name_ op, an in-place
    operator, an item store (x[i] = v), out=, inplace=True, batch norm's running statistics."""
    def mutates(n):
        if n.op == "call_method":
            return n.target.endswith("_")
        if n.op != "call_function":
            return False
        name = getattr(n.target, "__name__", "")
        schema = getattr(n.target, "_schema", None)  # torch.ops.ns.op.overload: its schema says
        packet = getattr(n.target, "_qualified_op_name", "")  # torch.ops.ns.op: by its name
        return (name.endswith("_") or name in _INPLACE or name == "setitem" or name in _WRITES_ARGS or
                "out" in n.kwargs or n.kwargs.get("inplace") is True or
                (schema is not None and schema.is_mutable) or packet.endswith("_"))
    return any(mutates(n) for n in gm.graph.nodes)


def _storage_groups(inputs):
    """Per input, the position of the first input sharing its storage (its own when none)."""
    first, groups = {}, []
    for i, t in enumerate(inputs):
        key = None
        if isinstance(t, torch.Tensor) and t.layout == torch.strided and t.device.type != "meta":
            try:
                ptr = t.untyped_storage().data_ptr()
            except Exception:  # tensor subclasses without a storage
                ptr = 0
            key = (t.device, ptr) if ptr else None
        groups.append(i if key is None else first.setdefault(key, i))
    return tuple(groups)


def _alias_check(inputs, skip):
    """check(*sizes, *inputs) -> bool: the tensor inputs share storage as these did. A graph
    with in-place ops is compiled for one such pattern (AOTAutograd handles inputs that alias
    only when it sees them alias); skip: the sizes before the inputs. Runs at every call: ember's
    C reads the storages where it can (a model's hundreds of parameters in microseconds)."""
    want = _storage_groups(inputs)
    groups = _C._storage_groups

    def check(*args):
        got = groups(args, skip)
        return (got if got is not NotImplemented else _storage_groups(args[skip:])) == want
    check.alias_want, check.alias_skip = want, skip  # ember's C makes this check itself (_Variants.alias_want)
    return check


def _self_overlap_mutated(gm, inputs):
    """An input whose elements share memory (an expand) in a graph with in-place ops: AOTAutograd
    writes mutated inputs back whole, which such a tensor refuses. The name of the case, or None."""
    if not _has_inplace(gm):
        return None
    for t in inputs:
        if isinstance(t, torch.Tensor) and t.layout == torch.strided and t.device.type != "meta" and \
                torch._debug_has_internal_overlap(t) == 1:
            return "an input whose elements share memory (such as an expand) in a graph with in-place ops"
    return None


def _swaps_storage(gm):
    """`t.data = v` (aten.shallow_copy_data_) of an input: AOTAutograd replays a storage swap of
    an input from the final value of the tensor it took the storage of, which a later swap of
    that one changes (`x.data = y; y.data = z` left x with z's data). The case, or None."""
    from .. import _rules
    if _rules.set_data is not None and gm.graph.find_nodes(op="call_function", target=_rules.set_data):
        return "a t.data = v store (a storage swap), which AOTAutograd replays from the final values"
    return None


def _aliased_mutated(gm, inputs):
    """Inputs that share storage (a view and its base) in a graph with in-place ops: AOTAutograd
    reads the others as they were before the mutation (`v.zero_(); y * 2` with v a view of y
    gives y's old values, under torch.compile too), so such a graph runs on ember's executor.
    The name of the case, or None."""
    if not _has_inplace(gm):
        return None
    groups = _storage_groups(inputs)
    if any(g != i for i, g in enumerate(groups)):
        return "inputs that share storage (a view and its base) in a graph with in-place ops"
    return None


def build_graph_module(desc, inputs, fake_mode, float_inputs=True):
    """(GraphModule, number of ops) for an exported graph and its real inputs. float_inputs: False
    when float inputs must be constants (an exact variant is exported instead)."""
    b = _Builder(desc, inputs, fake_mode, float_inputs)
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
    """Called by the C runtime at a graph's first call: returns (compiled callable, FX code,
    select, sizes), or (None, reason, None, ()) when the graph runs on ember's C executor instead.
    sizes: ((input, dim), ...), the sizes the compiled callable takes before the inputs (one per
    symbol, as TorchDynamo passes them). select is None, or for a graph with symbolic sizes whose
    backend assumed more about them than ember's guards hold, select(*sizes, *inputs) -> the
    compiled callable for these, or None: run them on ember's executor."""
    ones = _ones(desc, inputs)
    fn, info, check, sym_args = _compile(backend, _pin_ones(desc, ones), inputs, where)
    if fn is not None and ones:
        fn, check, sym_args = _with_ones(desc, ones, fn, check, sym_args)
    select = _Variants(backend, desc, where, check, fn, sym_args) if check is not None else None
    if select is not None and getattr(check, "alias_skip", None) == 0:
        select.alias_want = check.alias_want  # the check is the storage groups' only
    return fn, info, select, sym_args


# Sizes 1. ember's guards let a size symbol (or an int input's symbol) be 1 unless the trace
# treated 1 apart (then a relation excludes it); a ShapeEnv assumes its size symbols >= 2 and
# its backend may compile that in (a squeeze(d) made a no-op). So each compiled graph is for
# one set of the symbols being 1: those are static 1 in its export, and its check holds the
# others >= 2.

def _ones(desc, inputs):
    """The symbols (ember's numbers) whose value is 1 in these inputs."""
    if len(desc) < 3 or desc[2] is None:
        return frozenset()
    ones = set()
    for x, k in zip(inputs, desc[2][0]):
        if isinstance(k, tuple) and isinstance(x, torch.Tensor):
            ones.update(s for s, size in zip(k, x.shape) if s >= 0 and size == 1)
        elif isinstance(k, int) and k >= 0 and type(x) is int and x == 1:
            ones.add(k)
    return frozenset(ones)


def _pin_ones(desc, ones):
    """desc with the symbols in ones static (their sizes and ints as they come)."""
    if not ones:
        return desc
    nodes, outputs, (in_syms, prog) = desc
    pinned = tuple(tuple(-1 if s in ones else s for s in k) if isinstance(k, tuple) else -1 if k in ones else k
                   for k in in_syms)
    return nodes, outputs, (pinned, prog)


def _at_least_two(desc, sym_args):
    """check(*sizes, *inputs) -> bool: every symbol of desc is >= 2 (sizes of sym_args, int
    inputs with a symbol); None when there is none."""
    in_syms = desc[2][0]
    nsym = len(sym_args)
    at = list(range(nsym)) + [nsym + n for n, k in enumerate(in_syms) if isinstance(k, int) and k >= 0]
    if not at:
        return None

    def check(*args):
        return all(args[i] >= 2 for i in at)
    return check


def _and_checks(a, b):
    if a is None or b is None:
        return a or b
    return lambda *args: a(*args) and b(*args)


def _with_ones(desc, ones, fn, check, sym_args):
    """A graph compiled from _pin_ones(desc, ones) (whose size arguments are some of desc's:
    the unpinned symbols', or none) as one taking every symbol's size: (fn, check, sym_args)."""
    full = _full_sym_args(desc)
    if not set(sym_args) <= set(full):  # a subset (none: compiled for exact sizes): never else
        raise RuntimeError("ember: a graph with sizes 1 pinned takes other size arguments")
    keep = [full.index(a) for a in sym_args]
    nsym = len(full)
    in_syms = desc[2][0]
    at = [i for i, (n, d) in enumerate(full) if in_syms[n][d] in ones] + \
        [nsym + n for n, k in enumerate(in_syms) if isinstance(k, int) and k in ones]

    def narrow(args):
        return [args[i] for i in keep] + list(args[nsym:])

    def whole_check(*args):
        return all(args[i] == 1 for i in at) and (check is None or check(*narrow(args)))

    def whole(*args):
        return fn(*narrow(args))
    return whole, whole_check, tuple(full)


def _full_sym_args(desc):
    """(input, dim) of each size symbol's first dimension, in input order: the size arguments
    of a graph exported from desc (Builder.size_placeholders)."""
    in_syms = desc[2][0]
    ints = {k for k in in_syms if isinstance(k, int) and k >= 0}
    done, out = set(ints), []
    for n, dims in enumerate(in_syms):
        if isinstance(dims, tuple):
            for d, k in enumerate(dims):
                if k >= 0 and k not in done:
                    done.add(k)
                    out.append((n, d))
    return tuple(out)


# compiled graphs one ember graph may have for the sizes its backend assumed
_MAX_VARIANTS = 8
# graphs handed to a backend and compiled (ember.testing.counters()["backend_compiles"])
COUNTS = {"compiles": 0, "export_internal": 0}


class _Variants:
    """The backend's compiled graphs of one ember graph, each with check(*inputs) -> bool for the
    sizes it assumed beyond ember's guards (Inductor's choices made from the sizes it saw). A call
    no variant takes compiles another (as TorchDynamo recompiles when such a guard fails), up to
    _MAX_VARIANTS; after that, such calls run on ember's executor."""

    # the storage groups (one per input) that alone decide whether the first variant takes a
    # call: ember's C reads them and calls that variant without this object (em_rt_python.c)
    alias_want = None

    def __init__(self, backend, desc, where, check, fn, sym_args):
        self.backend, self.desc, self.where, self.sym_args = backend, desc, where, sym_args
        self.items = [(check, fn)]

    def __call__(self, *args):
        for check, fn in self.items:
            if check is None or check(*args):
                return fn
        if len(self.items) >= _MAX_VARIANTS:
            if "recompiles" in _logging.enabled:
                _logging.log("recompiles", f"the graph of {self.where} runs on ember's executor: its "
                                           f"{_MAX_VARIANTS} compiled variants assume other sizes")
            return None
        if "recompiles" in _logging.enabled:
            _logging.log("recompiles", f"recompiling the graph of {self.where} with backend {self.backend.name!r}: "
                                       "its compiled variants assume other sizes")
        inputs = args[len(self.sym_args):]
        ones = _ones(self.desc, inputs)
        fn, _info, check, sym_args = _compile(self.backend, _pin_ones(self.desc, ones), inputs, self.where)
        if fn is not None and ones:
            fn, check, sym_args = _with_ones(self.desc, ones, fn, check, sym_args)
        if fn is None or sym_args != self.sym_args:  # the convention is the export's: never differs
            return None
        self.items.append((check, fn))
        return fn


def _static_desc(desc):
    """The export with every size static: each input's as it comes (a variant for those sizes);
    -1 marks every input that is not a tensor's dims (an int passed as its value)."""
    nodes, outputs, (in_syms, _prog) = desc
    static = tuple(tuple(-1 for _ in d) if isinstance(d, tuple) else -1 for d in in_syms)
    return nodes, outputs, (static, ((), ()))


def _same_scalar(a, b):
    """a is the value b: ints equal; floats equal bit for bit (-0.0 is not 0.0; nan is nan)."""
    if type(a) is not type(b):
        return False
    if type(a) is float:
        import struct
        return struct.pack("<d", a) == struct.pack("<d", b) or (a != a and b != b)
    return a == b


def _exact_check(inputs):
    """check(*inputs) -> bool: the tensors have these sizes and the ints and floats these values."""
    want = [("t", tuple(x.shape)) if isinstance(x, torch.Tensor) else ("v", x) if type(x) in (int, float) else None
            for x in inputs]

    def check(*args):
        return all(w is None or (tuple(a.shape) == w[1] if w[0] == "t" else _same_scalar(a, w[1]))
                   for w, a in zip(want, args))
    return check


def _compile(backend, desc, inputs, where, exact=False):
    """(compiled callable, FX code, check or None, sizes), or (None, reason, None, ()). exact: a
    variant for the inputs' sizes (the symbolic export failed)."""
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
        gm, n_ops = build_graph_module(desc, inputs, fake_mode, float_inputs=not backend.cudagraphs)
        placeholder_vals = [n.meta["val"] for n in gm.graph.find_nodes(op="placeholder")]
        symbolic = len(desc) > 2 and desc[2] is not None
        overlap = _self_overlap_mutated(gm, inputs) or _aliased_mutated(gm, inputs) or _swaps_storage(gm)
        if overlap:
            raise _Unexportable(overlap)
    except _NeedsStatic as e:
        if "dynamic" in _logging.enabled:
            _logging.log("dynamic", f"the graph of {where} is compiled for its inputs as they are: {e}")
        return _compile(backend, _static_desc(desc), inputs, where, exact=True)
    except Exception as e:  # ember's own limits (or an internal error): never the user's problem
        internal = not isinstance(e, _Unexportable)
        if internal and len(desc) > 2 and desc[2] is not None and not exact:
            # torch could not run the graph with symbolic sizes: compiled for these sizes, as
            # TorchDynamo would with static shapes (other sizes compile other variants)
            if "dynamic" in _logging.enabled:
                _logging.log("dynamic", f"the graph of {where} is compiled for its inputs' sizes: torch could "
                                        f"not run it with symbolic sizes ({type(e).__name__}: {e})")
            return _compile(backend, _static_desc(desc), inputs, where, exact=True)
        COUNTS["export_internal"] += internal
        reason = f"internal error exporting to torch.fx: {type(e).__name__}: {e}" if internal else \
            f"not exported to torch.fx: {e}"
        _warn_executor(where, backend, reason, internal)
        return None, reason, None, ()
    if n_ops == 0:
        return None, "no operations (nothing to compile)", None, ()
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
        example = list(inputs)
        floats = gm.meta.get("ember_float_args", ())
        if symbolic:  # sizes and int inputs are SymInts, as TorchDynamo passes them (AOTAutograd would duck-size ints)
            nsym = len(gm.meta["ember_sym_args"])
            example = placeholder_vals[:nsym] + [v if isinstance(v, torch.SymInt) else x
                                                 for v, x in zip(placeholder_vals[nsym:], inputs)]
            for i, t in zip(floats, gm.meta["ember_float_examples"]):
                example[i] = t
        _clear_tensorify_state()
        with tracing(TracingContext(fake_mode)), torch._functorch.config.patch(**patch):
            fn = backend.compiler(gm, example)
    except RuntimeError as e:
        if _is_tensorify_restart(e) and not exact:
            # the backend could not turn a float input's uses into tensor ops (TorchDynamo then
            # retraces with the float a constant): a variant for the inputs as they are
            if "dynamic" in _logging.enabled:
                _logging.log("dynamic", f"the graph of {where} is compiled for its inputs' values: the backend "
                                        "specializes a float input")
            return _compile(backend, _static_desc(desc), inputs, where, exact=True)
        if _has_cond(gm):  # torch's cond cannot always be compiled (a branch whose gradient is an input)
            reason = f"torch.ops.higher_order.cond did not compile ({type(e).__name__}: {e})"
            _warn_executor(where, backend, reason)
            return None, reason, None, ()
        if symbolic and not exact and "modified by an inplace operation" not in str(e):
            # the backend could not take the graph with symbolic sizes (AOTAutograd's views of
            # inputs that alias each other): compiled for these sizes, as with static shapes
            if "dynamic" in _logging.enabled:
                _logging.log("dynamic", f"the graph of {where} is compiled for its inputs' sizes: the backend "
                                        f"failed with symbolic sizes ({type(e).__name__}: {e})")
            return _compile(backend, _static_desc(desc), inputs, where, exact=True)
        if _has_numbers(gm):
            reason = f"the numbers it computes from .item() did not compile ({type(e).__name__}: {e})"
            _warn_executor(where, backend, reason)
            return None, reason, None, ()
        if not any(m in str(e) for m in _BACKWARD_ONLY_ERRORS):
            raise BackendCompilerFailed(f"ember: backend {backend.name!r} failed to compile the graph of {where}: "
                                        f"{type(e).__name__}: {e}") from e
        # the backward, compiled with the forward here (lazily under torch.compile), cannot be
        # built; eager raises only if a backward runs: so does ember's executor
        reason = f"its backward cannot be compiled ({e})"
        _warn_executor(where, backend, reason)
        return None, reason, None, ()
    except Exception as e:
        if _has_cond(gm):
            reason = f"torch.ops.higher_order.cond did not compile ({type(e).__name__}: {e})"
            _warn_executor(where, backend, reason)
            return None, reason, None, ()
        if _has_numbers(gm):
            reason = f"the numbers it computes from .item() did not compile ({type(e).__name__}: {e})"
            _warn_executor(where, backend, reason)
            return None, reason, None, ()
        raise BackendCompilerFailed(f"ember: backend {backend.name!r} failed to compile the graph of {where}: "
                                    f"{type(e).__name__}: {e}") from e
    if not callable(fn):
        raise BackendCompilerFailed(f"ember: backend {backend.name!r} returned {type(fn).__name__} for the graph "
                                    f"of {where}, not a callable")
    COUNTS["compiles"] += 1
    check = None
    if exact:
        check = _exact_check(inputs)
    elif symbolic:
        check = _size_check(fake_mode.shape_env, gm.meta["ember_assumed_guards"], gm.meta["ember_check_vals"], where)
        check = _and_checks(_at_least_two(desc, gm.meta["ember_sym_args"]), check)  # the ShapeEnv's (_ones)
    if _has_inplace(gm):
        check = _and_checks(check, _alias_check(inputs, len(gm.meta.get("ember_sym_args", ())) if symbolic else 0))
    if floats:
        fn = _FloatsAsTensors(fn, floats)
    orders = [_dense_order(desc[0][r][-1]) if desc[0][r][-2] == 0 else None for r in desc[1]]
    if any(o is not None for o in orders):
        fn = _EagerLayouts(fn, orders)
    return fn, code, check, gm.meta.get("ember_sym_args", ())


def _dense_order(meta):
    """The dimensions of a traced tensor result innermost first, when its strides are dense in
    that order (dimensions of size 1 are placed by their strides: any stride is theirs), and
    its dimensions of size >= 2 number at least two (a layout to keep); else None."""
    if meta is None:
        return None
    sizes, strides = meta[4], meta[5]
    if sum(k >= 2 for k in sizes) < 2:
        return None
    order = sorted(range(len(sizes)), key=lambda d: (strides[d], -d))
    expect = 1
    for d in order:
        if sizes[d] >= 2 and strides[d] != expect:
            return None
        expect *= sizes[d]
    return tuple(order)


def _strides_in(order, shape):
    st, acc = [0] * len(shape), 1
    for d in order:
        st[d] = acc
        acc *= max(shape[d], 1)
    return tuple(st)


def _same_layout(t, want):
    return all(k < 2 or a == b for k, a, b in zip(t.shape, t.stride(), want))


class _EagerLayouts:
    """The compiled graph with its tensor results in the layouts eager's had when traced: a
    backend may return one in another (Inductor returns a KV cache `cat` made contiguous in
    eager as a transposed buffer), which .stride() and is_contiguous() tell apart and the next
    compile's stride guards see. A result found in another layout is copied into eager's on
    every call; one found in eager's (in two dimensions of size >= 2 at least) is left alone
    from then on."""

    def __init__(self, fn, orders):
        self.fn = fn
        self.orders = list(orders)  # per output: the order to check, or None (settled: as it comes)
        self.fix = [None] * len(orders)  # per output: the order to copy into

    def __call__(self, *args):
        out = self.fn(*args)
        if not isinstance(out, (tuple, list)) or len(out) != len(self.orders):
            return out
        res = None
        for i, order in enumerate(self.orders):
            t = out[i]
            if (order is None and self.fix[i] is None) or not isinstance(t, torch.Tensor) or t.dim() != len(
                    order or self.fix[i]):
                continue
            want = _strides_in(order or self.fix[i], t.shape)
            if _same_layout(t, want):
                if order is not None and sum(k >= 2 for k in t.shape) >= 2:
                    self.orders[i] = None  # the backend keeps eager's layout
                continue
            if order is not None:
                self.fix[i], self.orders[i] = order, None
            if res is None:
                res = list(out)
            res[i] = torch.empty_strided(t.shape, want, dtype=t.dtype, device=t.device).copy_(t)
        return out if res is None else type(out)(res)



def _float_tensor(v):
    return torch.tensor(v, dtype=torch.float64)


class _FloatsAsTensors:
    """The compiled graph called with its float inputs as float64 0-dim tensors (the export's
    convention, TorchDynamo's), from the Python floats ember's runtime passes."""

    def __init__(self, fn, positions):
        self.fn, self.positions = fn, positions

    def __call__(self, *args):
        args = list(args)
        for i in self.positions:
            args[i] = _float_tensor(args[i])
        return self.fn(*args)


def _is_tensorify_restart(e):
    try:
        from torch._dynamo.exc import TensorifyScalarRestartAnalysis
    except ImportError:  # a torch without the pass
        return False
    return isinstance(e, TensorifyScalarRestartAnalysis)


def _clear_tensorify_state():
    """Forgets the floats an earlier compile's tensorify pass specialized (its state is global and
    keyed by symbol names, which every export's ShapeEnv reuses; TorchDynamo clears it per frame)."""
    try:
        from torch.fx.passes._tensorify_python_scalars import TensorifyState
    except ImportError:
        return
    TensorifyState.clear()


def _size_check(shape_env, known, placeholder_vals, where):
    """check(*inputs) -> bool for what the backend assumed about the symbolic sizes beyond
    ember's guards (the ShapeEnv's guards after the first `known`), or None when it assumed
    nothing. A call failing it runs on ember's executor."""
    new = shape_env.guards[known:]
    if not new:
        return None
    from torch.fx.experimental.symbolic_shapes import SYMPY_INTERP
    text = shape_env.produce_guards_expression(placeholder_vals, guards=new)
    if not text:
        return None
    code = compile(text, f"<ember: sizes assumed by the backend for {where}>", "eval")
    names = [f"t{i}" for i in range(len(placeholder_vals))]
    if "dynamic" in _logging.enabled:
        _logging.log("dynamic", f"the backend's graph of {where} assumes {text}")

    def check(*args):
        return eval(code, SYMPY_INTERP, {"L": dict(zip(names, args))})
    return check
