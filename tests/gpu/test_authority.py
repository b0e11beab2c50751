"""Authority cannot be duplicated or used from elsewhere (issue 13, item 4).

Copying, deep-copying or pickling the session or anything it lends raises TypeError;
every lent object checks its thread and its scope on every use.
"""

from __future__ import annotations

import copy
import pickle
import threading

import numpy as np
import pytest

import tenferro_cuda as tc

SRC = r'extern "C" __global__ void k(float* p) { p[threadIdx.x] = 1.0f; }'


def _lent(s, raw, ks, x):
    module = raw.compile_nvrtc(SRC)
    return {
        "session": s, "raw_session": raw, "kernel_session": ks,
        "stream_handle": raw.stream(), "module": module, "function": module.function("k"),
        "library_function": ks.function("copy", "fill", "tf::u32"),
        "device_pointer": raw.tensor(x), "runtime": s.runtime(), "exec_context": s._ctx,
        "buffer": x.buffer,
    }


COPIERS = {"copy": copy.copy, "deepcopy": copy.deepcopy,
           "pickle": lambda o: pickle.dumps(o, protocol=pickle.HIGHEST_PROTOCOL),
           "pickle0": lambda o: pickle.dumps(o, protocol=0)}


@pytest.mark.parametrize("how", COPIERS)
def test_nothing_with_authority_can_be_copied_or_pickled(how):
    with tc.cuda_exec_session(0) as s:
        x = s.upload_host_tensor(np.zeros(32, np.float32))
        with s.raw("test.copy") as raw, s.kernels("test.copy") as ks:
            for name, obj in _lent(s, raw, ks, x).items():
                with pytest.raises(TypeError, match="cannot be"):
                    COPIERS[how](obj)
                assert name
        s.synchronize()
        with pytest.raises(TypeError):  # a tensor's deep copy would duplicate its buffer
            copy.deepcopy(x)
        assert copy.copy(x).buffer is x.buffer  # a shallow copy shares it: harmless
        np.testing.assert_array_equal(s.download_to_host(x).numpy(), 0)


def test_copied_session_never_exists():
    with tc.cuda_exec_session(0) as s:
        with pytest.raises(TypeError):
            copy.copy(s)
        s.synchronize()  # the original still works


def _from_other_thread(fn):
    box = []

    def run():
        try:
            fn()
            box.append(None)
        except Exception as exc:  # noqa: BLE001 - inspected below
            box.append(exc)

    t = threading.Thread(target=run)
    t.start()
    t.join()
    return box[0]


USES = {
    "session.add": lambda o: o["session"].add(o["x"], o["x"]),
    "session.synchronize": lambda o: o["session"].synchronize(),
    "session.device_info": lambda o: o["session"].device_info(),
    "raw.stream": lambda o: o["raw_session"].stream(),
    "raw.tensor": lambda o: o["raw_session"].tensor(o["x"]),
    "raw.launch": lambda o: o["raw_session"].launch(o["function"], tc.LaunchConfig(1, 32),
                                                    [tc.KernelArg.pointer(o["ptr_value"])]),
    "stream.handle": lambda o: o["stream_handle"].handle,
    "module.function": lambda o: o["module"].function("k"),
    "function.attributes": lambda o: o["function"].attributes(),
    "kernels.function": lambda o: o["kernel_session"].function("copy", "fill", "tf::u32"),
    "kernels.alloc_zero_output": lambda o: o["kernel_session"].alloc_zero_output(
        tc.float32, (4,)),
    "device_pointer.address": lambda o: o["device_pointer"].address,
}


@pytest.mark.parametrize("use", USES)
def test_lent_objects_refuse_other_threads(use):
    with tc.cuda_exec_session(0) as s:
        x = s.upload_host_tensor(np.zeros(32, np.float32))
        with s.raw("test.thread") as raw, s.kernels("test.thread") as ks:
            objs = _lent(s, raw, ks, x)
            objs["x"], objs["ptr_value"] = x, x.data_ptr()
            err = _from_other_thread(lambda: USES[use](objs))
            assert isinstance(err, tc.RuntimeStateError), err
            assert "another thread" in str(err)
            USES[use](objs)  # and on its own thread it works
        s.synchronize()


@pytest.mark.parametrize("use", [u for u in USES if not u.startswith("session")])
def test_lent_objects_refuse_after_their_scope(use):
    with tc.cuda_exec_session(0) as s:
        x = s.upload_host_tensor(np.zeros(32, np.float32))
        with s.raw("test.scope") as raw, s.kernels("test.scope") as ks:
            objs = _lent(s, raw, ks, x)
            objs["x"], objs["ptr_value"] = x, x.data_ptr()
        with pytest.raises(tc.RuntimeStateError):
            USES[use](objs)
        s.synchronize()


def test_sub_session_objects_die_with_the_session():
    with tc.cuda_exec_session(0) as s:
        x = s.upload_host_tensor(np.zeros(32, np.float32))
        scope = s.raw("test.outlive")
        raw = scope.__enter__()
        stream = raw.stream()
        scope.__exit__(None, None, None)
    for use in (raw.stream, lambda: stream.handle, lambda: raw.tensor(x)):
        with pytest.raises(tc.RuntimeStateError):
            use()


def test_capability_names():
    assert tc.GpuExtensionCapability is tc.Capability
    with tc.cuda_exec_session(0) as s:
        assert s.supports(tc.GpuExtensionCapability.RAW_MODULE)
        assert s.supports("kernel_session")
