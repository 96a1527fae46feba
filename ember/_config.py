"""ember.config: settings read by the C core. Assigning an attribute pushes it to C."""
import os


class _Config:
    _fields = ("cache_size_limit", "strict", "force_python_tensor_guards")

    def __init__(self):
        object.__setattr__(self, "cache_size_limit", 8)
        object.__setattr__(self, "strict", False)
        # Use torch's Python attributes instead of direct field reads in tensor guards
        # (slower; for tests and for torch builds whose layout ember cannot verify).
        object.__setattr__(self, "force_python_tensor_guards",
                           os.environ.get("EMBER_PYTHON_TENSOR_GUARDS", "") == "1")

    def __setattr__(self, name, value):
        if name not in self._fields:
            raise AttributeError(f"ember.config has no setting {name!r}; settings: {', '.join(self._fields)}")
        if name == "cache_size_limit" and (not isinstance(value, int) or value < 1):
            raise ValueError("ember.config.cache_size_limit must be a positive int")
        object.__setattr__(self, name, value)
        from . import _push_config
        _push_config()

    def __repr__(self):
        return "ember.config(" + ", ".join(f"{k}={getattr(self, k)!r}" for k in self._fields) + ")"


config = _Config()
