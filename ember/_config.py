"""ember.config: settings read by the C core. Assigning an attribute pushes it to C."""
import os


class _Config:
    _fields = ("cache_size_limit", "accumulated_recompile_limit", "strict", "force_python_tensor_guards",
               "capture_scalar_outputs", "capture_dynamic_output_shape_ops")

    def __init__(self):
        # Entries per code object (per function); a code that needs one more runs as plain
        # Python from then on, and so do the functions it calls (no compile storm below it).
        object.__setattr__(self, "cache_size_limit", 8)
        # Compiles of a frame and of everything it calls (helpers, resume functions) while
        # it is the outermost compiled frame of its thread; at the limit that function and
        # everything it calls run as plain Python (TorchDynamo's accumulated_recompile_limit).
        object.__setattr__(self, "accumulated_recompile_limit", 256)
        object.__setattr__(self, "strict", False)
        # Use torch's Python attributes instead of direct field reads in tensor guards
        # (slower; for tests and for torch builds whose layout ember cannot verify).
        object.__setattr__(self, "force_python_tensor_guards",
                           os.environ.get("EMBER_PYTHON_TENSOR_GUARDS", "") == "1")
        # x.item() of a tensor the graph computes is a number of the graph (as with fullgraph=True,
        # or TorchDynamo's capture_scalar_outputs) rather than a graph break
        object.__setattr__(self, "capture_scalar_outputs",
                           os.environ.get("EMBER_CAPTURE_SCALAR_OUTPUTS", "") == "1")
        # x.nonzero(), x[mask], x.masked_select(mask): ops whose result size depends on the data
        # are in the graph, that size a symbol (as with fullgraph=True, or TorchDynamo's
        # capture_dynamic_output_shape_ops) rather than a graph break
        object.__setattr__(self, "capture_dynamic_output_shape_ops",
                           os.environ.get("EMBER_CAPTURE_DYNAMIC_OUTPUT_SHAPE_OPS", "") == "1")

    def __setattr__(self, name, value):
        if name not in self._fields:
            raise AttributeError(f"ember.config has no setting {name!r}; settings: {', '.join(self._fields)}")
        if name in ("cache_size_limit", "accumulated_recompile_limit") and (
                not isinstance(value, int) or isinstance(value, bool) or not 1 <= value < 2**31):
            raise ValueError(f"ember.config.{name} must be a positive int")
        object.__setattr__(self, name, value)
        from . import _push_config
        _push_config()

    def __repr__(self):
        return "ember.config(" + ", ".join(f"{k}={getattr(self, k)!r}" for k in self._fields) + ")"


config = _Config()
