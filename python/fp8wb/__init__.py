"""fp8wb: watch a PyTorch training's FP8 numerics in FP8 Workbench.

    import fp8wb
    with fp8wb.watch(model, db="runs.sqlite", name="my-run", recipe="tensorwise",
                     formats="hybrid", scaling="delayed", window=16, margin=0,
                     stats_interval=25, config={"lr": 3e-4}) as w:
        for batch in loader:
            loss = model(batch).loss
            loss.backward(); opt.step(); opt.zero_grad()
            w.step(loss=loss, lr=sched.get_last_lr()[0])

Every nn.Linear of the model (those `module_filter(module, name)` accepts) is hooked: its
forward gives the input and the weight, its output's gradient the output gradient. Each
is quantized by FP8 Workbench's own kernels (libfp8wb_watch.so, beside this file, through
its C ABI) under the chosen recipe, on the tensor's GPU where the library was built with
CUDA (else from a host copy): every step's amax goes into delayed scaling's history and
the run's per-step amax (what `fp8wb replay` replays), and every `stats_interval` steps
the full statistics (scale, underflow, saturation, exponent histogram, per-block error
map) are taken. Steps and statistics go to the workbench's run database, where
`fp8wb runs` and the GUI read them, live.

The run ends 'finished' when the `with` block ends, 'stopped' on KeyboardInterrupt (SIGINT),
'failed' with the message of any other exception, and 'interrupted' when the process dies.
`db` and `name` default to the environment's FP8WB_DB and FP8WB_RUN_NAME (the GUI sets
them for a script it starts), else the workbench's default database and the script's name.
"""

import atexit
import ctypes
import json
import math
import os
import sys
import time
import weakref

__all__ = ["watch", "Watch", "quantize_stats", "StoreError", "default_database"]

_LIB_NAME = "libfp8wb_watch.so"
_ABI_VERSION = 3

# enum values of watch_abi.h
_F32, _BF16 = 0, 1
_CPU, _CUDA = 0, 1
_ROLES = {"input": 0, "weight": 1, "grad_output": 2}
_ROLE_NAMES = {v: k for k, v in _ROLES.items()}
_BATCH = 16  # CUDA tensors queued between samples before they go to the library
_FINISHED, _STOPPED, _FAILED, _INTERRUPTED = 0, 1, 2, 3
_ERR_ARGUMENT, _ERR_STORE = -1, -2
_HIST_BINS = 66


class StoreError(RuntimeError):
    """The run database could not be opened or written (named in the message)."""


class _Tensor(ctypes.Structure):
    _fields_ = [("data", ctypes.c_void_p), ("dtype", ctypes.c_int32), ("device", ctypes.c_int32),
                ("device_index", ctypes.c_int32), ("reserved", ctypes.c_int32),
                ("rows", ctypes.c_int64), ("cols", ctypes.c_int64), ("stream", ctypes.c_void_p)]


class _Stats(ctypes.Structure):
    _fields_ = [("amax", ctypes.c_float), ("scale", ctypes.c_float),
                ("numel", ctypes.c_uint64), ("zeros", ctypes.c_uint64),
                ("nonfinite", ctypes.c_uint64), ("underflow", ctypes.c_uint64),
                ("subnormal", ctypes.c_uint64), ("saturated", ctypes.c_uint64),
                ("sq_err", ctypes.c_double), ("sq_sum", ctypes.c_double),
                ("hist", ctypes.c_uint64 * _HIST_BINS)]


def _load():
    path = os.path.join(os.path.dirname(os.path.abspath(__file__)), _LIB_NAME)
    try:
        lib = ctypes.CDLL(path)
    except OSError as e:
        raise ImportError(f"fp8wb: cannot load {path}: {e}") from e
    P, I32, I64 = ctypes.c_void_p, ctypes.c_int32, ctypes.c_int64
    S = ctypes.c_char_p
    sig = {
        "fp8wb_abi_version": (ctypes.c_int, []),
        "fp8wb_last_error": (S, []),
        "fp8wb_last_error_code": (ctypes.c_int, []),
        "fp8wb_default_database": (S, []),
        "fp8wb_devices": (ctypes.c_int, []),
        "fp8wb_watch_open": (P, [S, S, S, S, S, S]),
        "fp8wb_watch_run_id": (I64, [P]),
        "fp8wb_watch_step": (I64, [P]),
        "fp8wb_watch_sampling": (ctypes.c_int, [P]),
        "fp8wb_watch_records_amax": (ctypes.c_int, [P]),
        "fp8wb_watch_observe": (ctypes.c_int, [P, S, I32, ctypes.POINTER(_Tensor)]),
        "fp8wb_watch_observe_many": (ctypes.c_int, [P, I32, ctypes.POINTER(S),
                                                    ctypes.POINTER(I32),
                                                    ctypes.POINTER(_Tensor)]),
        "fp8wb_watch_scalars": (ctypes.c_int, [P, I64, ctypes.POINTER(S),
                                               ctypes.POINTER(ctypes.c_double), I32]),
        "fp8wb_watch_next_step": (ctypes.c_int, [P]),
        "fp8wb_watch_event": (ctypes.c_int, [P, S, S]),
        "fp8wb_watch_end": (ctypes.c_int, [P, I32, S]),
        "fp8wb_watch_close": (None, [P]),
        "fp8wb_quantize_stats": (ctypes.c_int, [ctypes.POINTER(_Tensor), S, S, I32,
                                                ctypes.c_float, ctypes.POINTER(_Stats)]),
    }
    for name, (res, args) in sig.items():
        f = getattr(lib, name)
        f.restype = res
        f.argtypes = args
    if lib.fp8wb_abi_version() != _ABI_VERSION:
        raise ImportError(f"fp8wb: {path} has ABI version {lib.fp8wb_abi_version()}, "
                          f"this package needs {_ABI_VERSION}: install them together")
    return lib


_lib = _load()


def _b(s):
    return s.encode("utf-8") if s is not None else None


def _check(rc):
    """Raises what the last call of the library failed with (rc < 0)."""
    if rc >= 0:
        return rc
    message = (_lib.fp8wb_last_error() or b"").decode("utf-8", "replace")
    code = _lib.fp8wb_last_error_code()
    if code == _ERR_STORE:
        raise StoreError(message)
    if code == _ERR_ARGUMENT:
        raise ValueError(message)
    raise RuntimeError(message)


def default_database():
    """The run database the GUI and `fp8wb` use when none is named."""
    return _lib.fp8wb_default_database().decode("utf-8")


def _torch():
    import torch
    return torch


_FLOAT_DTYPES = None


def _host_tensor(x, what):
    """(a row-major 2-D view the kernels take, kept alive by the caller; its _Tensor)."""
    torch = _torch()
    if not isinstance(x, torch.Tensor):
        raise TypeError(f"{what}: a {type(x).__name__}, not a torch.Tensor")
    if not x.is_floating_point():
        raise TypeError(f"{what}: a {x.dtype} tensor; fp8wb quantizes floating-point tensors "
                        "(float32, bfloat16, float16)")
    x = x.detach()
    if x.dim() == 0:
        x = x.reshape(1, 1)
    elif x.dim() == 1:
        x = x.reshape(1, -1)
    else:
        x = x.reshape(-1, x.shape[-1])
    if x.device.type != "cpu":
        # This library's kernels take host tensors: the statistics are the same.
        x = x.to("cpu")
    if x.dtype not in (torch.float32, torch.bfloat16):
        x = x.float()  # float16 and float64 values as float32 (float16 exactly)
    x = x.contiguous()
    t = _Tensor(x.data_ptr(), _F32 if x.dtype == torch.float32 else _BF16, _CPU, 0, 0,
                x.shape[0], x.shape[1], None)
    return x, t


def _cuda_kernels():
    """Whether this library quantizes CUDA tensors on their GPU (built with CUDA, a GPU seen)."""
    return bool(_lib.fp8wb_devices() & 2)


def _tensor(x, what):
    """(a row-major 2-D view the kernels take, kept alive by the caller; its _Tensor): a CUDA
    tensor stays on its GPU where the library's CUDA kernels can take it (on the current
    stream, in whose order PyTorch's allocator reuses its memory), else a host copy."""
    torch = _torch()
    if not (isinstance(x, torch.Tensor) and x.is_cuda and _cuda_kernels()):
        return _host_tensor(x, what)
    if not x.is_floating_point():
        raise TypeError(f"{what}: a {x.dtype} tensor; fp8wb quantizes floating-point tensors "
                        "(float32, bfloat16, float16)")
    x = x.detach()
    x = x.reshape(1, -1) if x.dim() <= 1 else x.reshape(-1, x.shape[-1])
    if x.dtype not in (torch.float32, torch.bfloat16):
        x = x.float()
    x = x.contiguous()
    stream = torch.cuda.current_stream(x.device).cuda_stream
    t = _Tensor(x.data_ptr(), _F32 if x.dtype == torch.float32 else _BF16, _CUDA,
                x.device.index or 0, 0, x.shape[0], x.shape[1], stream)
    return x, t


def quantize_stats(x, scaling="tensorwise", format="e4m3fn", margin=0, scale=None):
    """One quantization of tensor x (its last dimension K) by the workbench's kernels: the
    statistics a watched run stores, as a dict. scale: quantize tensorwise with this scale
    (delayed scaling's), else the recipe's current scaling."""
    kept, t = _tensor(x, "quantize_stats")
    out = _Stats()
    _check(_lib.fp8wb_quantize_stats(ctypes.byref(t), _b(scaling), _b(format), int(margin),
                                     float(scale) if scale else 0.0, ctypes.byref(out)))
    del kept
    d = {f: getattr(out, f) for f, _ in _Stats._fields_ if f != "hist"}
    d["histogram"] = list(out.hist)
    return d


_open_watches = weakref.WeakSet()


@atexit.register
def _end_open_watches():
    for w in list(_open_watches):
        w._end(_INTERRUPTED, "the script ended without ending the watch (use `with "
                             "fp8wb.watch(...)`, or call close())")


def _scalar_value(name, v):
    """A float now, or (tensor on its way to the host, its CUDA event) to read later."""
    torch = sys.modules.get("torch")
    if torch is not None and isinstance(v, torch.Tensor):
        if v.numel() != 1:
            raise ValueError(f"step(): {name} is a tensor of {v.numel()} elements, not one")
        if not (v.is_floating_point() or v.dtype in (torch.int32, torch.int64)):
            raise TypeError(f"step(): {name} is a {v.dtype} tensor, not a number")
        v = v.detach().reshape(())
        if v.is_cuda:
            host = v.to("cpu", non_blocking=True)
            event = torch.cuda.Event()
            event.record()
            return (host, event)
        return float(v)
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        try:
            return float(v)
        except (TypeError, ValueError):
            raise TypeError(f"step(): {name} is a {type(v).__name__}, not a number") from None
    return float(v)


class Watch:
    """A watched run: see watch()."""

    def __init__(self, model, db=None, name=None, recipe="tensorwise", formats="hybrid",
                 scaling="delayed", window=16, margin=0, amax_algo="max", stats_interval=25,
                 config=None, module_filter=None):
        torch = _torch()
        if not isinstance(model, torch.nn.Module):
            raise TypeError(f"watch(): model is a {type(model).__name__}, not a torch.nn.Module")
        layers = []
        for layer_name, m in model.named_modules():
            if isinstance(m, torch.nn.Linear) and (module_filter is None
                                                   or module_filter(m, layer_name)):
                layers.append((layer_name or type(m).__name__, m))
        if not layers:
            raise ValueError(f"watch(): {type(model).__name__} has no torch.nn.Linear layer"
                             + (" that module_filter accepts" if module_filter else "")
                             + ": nothing to watch")
        db = db or os.environ.get("FP8WB_DB") or default_database()
        name = name or os.environ.get("FP8WB_RUN_NAME") or _script_name(model)
        settings = {"recipe": recipe, "formats": formats, "scaling": scaling, "window": window,
                    "margin": margin, "amax_algo": amax_algo, "stats_interval": stats_interval}
        try:
            config_text = json.dumps(config if config is not None else {}, default=str)
        except (TypeError, ValueError) as e:
            raise TypeError(f"watch(): config is not JSON: {e}") from None
        if config is not None and not isinstance(config, dict):
            raise TypeError(f"watch(): config is a {type(config).__name__}, not a dict")
        params = list(model.parameters())
        device = str(params[0].device) if params else "cpu"
        handle = _lib.fp8wb_watch_open(_b(os.fspath(db)), _b(name), _b(json.dumps(settings)),
                                       _b(config_text), _b(type(model).__name__), _b(device))
        if not handle:
            _check(_lib.fp8wb_last_error_code() or -3)
        self._h = handle
        self.db = os.fspath(db)
        self.name = name
        self.run_id = _lib.fp8wb_watch_run_id(handle)
        self._records_amax = bool(_lib.fp8wb_watch_records_amax(handle))
        self._seen = []       # layers in the order their first forward came
        self._seen_set = set()
        self._pending = []    # (step, [(name, value or (host, event))])
        self._last = time.perf_counter()
        self._ended = False
        self._hooks = []
        self._error = None
        cuda = any(p.is_cuda for p in params)
        # Between samples a CUDA tensor's amax is all that is taken: such tensors are
        # queued here and handed to the library a batch at a time (one call, its amax
        # kernels launched together), not one call a tensor, so that the hooks cost the
        # training loop's host thread little. A batch holds at most _BATCH tensors.
        self._batching = cuda and _cuda_kernels()
        self._queued = []
        self._layer_names = {}
        self._sampling = bool(_lib.fp8wb_watch_sampling(handle))
        where = ("statistics by the workbench's CUDA kernels on the GPU" if cuda and _cuda_kernels()
                 else "statistics by the workbench's CPU kernels"
                 + (" from host copies of the GPU's tensors" if cuda else ""))
        started = (f"watching {type(model).__name__} on {device}: {len(layers)} linear "
                   f"layer{'s' if len(layers) != 1 else ''}; PyTorch {torch.__version__}; "
                   + where)
        self._event("started", started)
        for layer_name, m in layers:
            self._hooks.append(m.register_forward_hook(self._forward_hook(layer_name)))
        if self._batching:
            # The model's forward has ended: its queued tensors go.
            self._hooks.append(model.register_forward_hook(self._model_hook()))
        _open_watches.add(self)

    # The hooks. A forward that builds no graph (evaluation under torch.no_grad()) is not a
    # training step's and is not recorded.
    def _forward_hook(self, layer):
        ref = weakref.ref(self)
        torch = _torch()

        def hook(module, inputs, output):
            w = ref()
            if w is None or w._ended or not torch.is_grad_enabled():
                return
            if not w._records_amax and not w._sampling:
                return  # nothing is recorded between samples
            if layer not in w._seen_set:
                w._seen_set.add(layer)
                w._seen.append(layer)
            if inputs:
                w._observe(layer, 0, inputs[0])
            w._observe(layer, 1, module.weight)
            if isinstance(output, torch.Tensor) and output.requires_grad:
                output.register_hook(lambda g: w._grad(layer, g))
        return hook

    def _model_hook(self):
        ref = weakref.ref(self)

        def hook(module, inputs, output):
            w = ref()
            if w is not None and not w._ended:
                w._flush_observed()
        return hook

    def _grad(self, layer, g):
        if not self._ended:
            self._observe(layer, 2, g)

    def _observe(self, layer, role, x):
        torch = _torch()
        if (self._batching and not self._sampling and isinstance(x, torch.Tensor)
                and x.is_cuda):
            if not x.is_floating_point():
                raise TypeError(f"layer {layer}, {_ROLE_NAMES[role]}: a {x.dtype} tensor; "
                                "fp8wb quantizes floating-point tensors (float32, bfloat16, "
                                "float16)")
            self._queued.append((layer, role, x.detach()))
            if len(self._queued) >= _BATCH:
                self._flush_observed()
            return
        self._flush_observed()  # in order
        kept, t = _tensor(x, f"layer {layer}, {_ROLE_NAMES[role]}")
        rc = _lib.fp8wb_watch_observe(self._h, self._layer_name(layer), role, ctypes.byref(t))
        del kept
        _check(rc)

    def _layer_name(self, layer):
        b = self._layer_names.get(layer)
        if b is None:
            b = self._layer_names[layer] = _b(layer)
        return b

    def _flush_observed(self):
        """The queued CUDA tensors to the library in one call (their amaxes on the GPU)."""
        queued = self._queued
        if not queued:
            return
        self._queued = []
        torch = _torch()
        n = len(queued)
        tensors = (_Tensor * n)()
        names = (ctypes.c_char_p * n)()
        roles = (ctypes.c_int32 * n)()
        kept = []
        streams = {}
        for i, (layer, role, x) in enumerate(queued):
            x = x.reshape(1, -1) if x.dim() <= 1 else x.reshape(-1, x.shape[-1])
            if x.dtype is not torch.float32 and x.dtype is not torch.bfloat16:
                x = x.float()
            if not x.is_contiguous():
                x = x.contiguous()
            kept.append(x)
            index = x.device.index or 0
            stream = streams.get(index)
            if stream is None:
                stream = streams[index] = torch.cuda.current_stream(x.device).cuda_stream
            tensors[i] = _Tensor(x.data_ptr(), _F32 if x.dtype is torch.float32 else _BF16,
                                 _CUDA, index, 0, x.shape[0], x.shape[1], stream)
            names[i] = self._layer_name(layer)
            roles[i] = role
        rc = _lib.fp8wb_watch_observe_many(self._h, n, names, roles, tensors)
        del kept
        _check(rc)

    def _event(self, kind, message):
        _check(_lib.fp8wb_watch_event(self._h, _b(kind), _b(message)))

    @property
    def step_index(self):
        """The step being observed (steps count from 0)."""
        return _lib.fp8wb_watch_step(self._h)

    def step(self, loss=None, **scalars):
        """Ends a training step: its loss (a float or a one-element tensor, read without
        waiting for the GPU) and any other scalars (lr=..., grad_norm=..., tokens=... for
        tokens/s, or names of your own)."""
        if self._ended:
            raise RuntimeError("step(): the watched run has ended")
        now = time.perf_counter()
        values = [("step_ms", (now - self._last) * 1000.0)]
        self._last = now
        if loss is not None:
            values.append(("loss", _scalar_value("loss", loss)))
        for k, v in scalars.items():
            values.append((k, _scalar_value(k, v)))
        self._flush_observed()
        step = _lib.fp8wb_watch_step(self._h)
        if step == 0 and self._seen:
            self._event("layers", ", ".join(self._seen))
        self._pending.append((step, values))
        self._flush_scalars(wait=False)
        _check(_lib.fp8wb_watch_next_step(self._h))
        self._sampling = bool(_lib.fp8wb_watch_sampling(self._h))

    def _flush_scalars(self, wait):
        while self._pending:
            step, values = self._pending[0]
            ready = []
            for k, v in values:
                if isinstance(v, tuple):
                    host, event = v
                    if not wait and not event.query():
                        return  # the GPU has not got there yet: later, in order
                    event.synchronize()
                    v = float(host)
                ready.append((k, v))
            self._pending.pop(0)
            names = (ctypes.c_char_p * len(ready))(*[_b(k) for k, _ in ready])
            vals = (ctypes.c_double * len(ready))(*[v for _, v in ready])
            _check(_lib.fp8wb_watch_scalars(self._h, step, names, vals, len(ready)))

    def _end(self, how, message):
        if self._ended:
            return
        self._ended = True
        for h in self._hooks:
            h.remove()
        self._hooks = []
        try:
            if how != _INTERRUPTED:
                self._flush_observed()
                self._flush_scalars(wait=True)
        finally:
            try:
                _check(_lib.fp8wb_watch_end(self._h, how, _b(message)))
            finally:
                _lib.fp8wb_watch_close(self._h)
                _open_watches.discard(self)

    def close(self, status="finished", message=""):
        """Ends the run: 'finished', 'stopped' or 'failed' (with a message)."""
        how = {"finished": _FINISHED, "stopped": _STOPPED, "failed": _FAILED}.get(status)
        if how is None:
            raise ValueError(f"close(): status {status!r} is not finished, stopped or failed")
        self._end(how, message)

    def __enter__(self):
        return self

    def __exit__(self, exc_type, exc, tb):
        steps = _lib.fp8wb_watch_step(self._h) if not self._ended else 0
        if exc_type is None:
            self._end(_FINISHED, "")
        elif issubclass(exc_type, KeyboardInterrupt):
            self._end(_STOPPED, f"stopped after {steps} step{'s' if steps != 1 else ''} "
                                "(KeyboardInterrupt)")
        else:
            text = str(exc)
            self._end(_FAILED, f"{exc_type.__name__}: {text}" if text else exc_type.__name__)
        return False

    def __del__(self):
        if not getattr(self, "_ended", True):
            try:
                self._end(_INTERRUPTED, "the watch was dropped without being closed")
            except Exception:
                pass


def _script_name(model):
    argv0 = sys.argv[0] if sys.argv and sys.argv[0] not in ("", "-c", "-") else ""
    base = os.path.splitext(os.path.basename(argv0))[0]
    return base or type(model).__name__


def watch(model, db=None, name=None, recipe="tensorwise", formats="hybrid", scaling="delayed",
          window=16, margin=0, amax_algo="max", stats_interval=25, config=None,
          module_filter=None):
    """Starts a watched run of `model`'s training (see the module's help). Use it as a
    context manager, or call close() at the end. Raises ValueError naming a bad setting or
    a model with no nn.Linear, StoreError for a database it cannot use."""
    return Watch(model, db=db, name=name, recipe=recipe, formats=formats, scaling=scaling,
                 window=window, margin=margin, amax_algo=amax_algo,
                 stats_interval=stats_interval, config=config, module_filter=module_filter)
