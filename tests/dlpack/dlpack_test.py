#!/usr/bin/env python3
"""DLPack 1.1 interop of libchutney with NumPy (>= 2.1: versioned DLPack), through ctypes only.
float16 and int8 arrays and bfloat16 bit patterns (ABI 1.5 dtypes) cross both ways too.

Asserts: zero-copy both ways (pointer equality), strides and byte offsets honoured, a read-only
array stays unwritten (chutney refuses the write), the deleter runs exactly once and only when
the last chutney view goes, bad major/lanes/dtype call the deleter and fail with a message,
CTN_DLPACK_CONTIGUOUS copies and says IS_COPIED, and 10,000 round trips leak neither deleters
nor memory. Usage: dlpack_test.py [--torch] path/to/libchutney.so"""
import ctypes as C
import os
import sys

# --torch: also exchange PyTorch's bfloat16, float16 and int8 tensors (the peer venv: re-run
# under $TORCH_PY or /tmp/torch2-venv's Python when this one lacks torch; exit 77, SKIP, if none).
torch = None
if "--torch" in sys.argv:
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "common"))
    from torch_peer import torch_or_rerun  # noqa: E402

    torch = torch_or_rerun()
    sys.argv.remove("--torch")

import numpy as np  # noqa: E402 (after the re-run under the torch venv)

assert tuple(int(x) for x in np.__version__.split(".")[:2]) >= (2, 1), "NumPy >= 2.1 exports versioned DLPack"
lib = C.CDLL(sys.argv[1])


class DLDevice(C.Structure):
    _fields_ = [("device_type", C.c_int), ("device_id", C.c_int32)]


class DLDataType(C.Structure):
    _fields_ = [("code", C.c_uint8), ("bits", C.c_uint8), ("lanes", C.c_uint16)]


class DLTensor(C.Structure):
    _fields_ = [("data", C.c_void_p), ("device", DLDevice), ("ndim", C.c_int32), ("dtype", DLDataType),
                ("shape", C.POINTER(C.c_int64)), ("strides", C.POINTER(C.c_int64)), ("byte_offset", C.c_uint64)]


class DLManaged(C.Structure):
    pass


DELETER = C.CFUNCTYPE(None, C.POINTER(DLManaged))
DLManaged._fields_ = [("major", C.c_uint32), ("minor", C.c_uint32), ("manager_ctx", C.c_void_p),
                      ("deleter", DELETER), ("flags", C.c_uint64), ("dl_tensor", DLTensor)]
assert C.sizeof(DLTensor) == 48 and C.sizeof(DLManaged) == 80 and DLManaged.dl_tensor.offset == 32

READ_ONLY, IS_COPIED = 1, 2
CTN_OK, CTN_ERR_UNSUPPORTED, CTN_ERR_STATE = 0, 6, 10
CTN_F32 = 0

lib.ctn_tensor_from_dlpack.argtypes = [C.POINTER(DLManaged), C.POINTER(C.c_void_p)]
lib.ctn_tensor_to_dlpack.argtypes = [C.c_void_p, C.c_uint32, C.POINTER(C.POINTER(DLManaged))]
lib.ctn_tensor_release.argtypes = [C.c_void_p]
lib.ctn_tensor_read.argtypes = [C.c_void_p, C.c_void_p, C.c_size_t]
lib.ctn_tensor_write.argtypes = [C.c_void_p, C.c_void_p, C.c_size_t]
lib.ctn_tensor_slice.argtypes = [C.c_void_p, C.c_int32, C.c_int64, C.c_int64, C.c_int64, C.POINTER(C.c_void_p)]
lib.ctn_tensor_create.argtypes = [C.c_int, C.c_uint32, C.POINTER(C.c_int64), C.c_void_p, C.POINTER(C.c_void_p)]
lib.ctn_tensor_data.argtypes = [C.c_void_p, C.POINTER(C.c_void_p)]
lib.ctn_last_error.restype = C.c_char_p

api = C.pythonapi
api.PyCapsule_GetPointer.restype = C.c_void_p
api.PyCapsule_GetPointer.argtypes = [C.py_object, C.c_char_p]
api.PyCapsule_SetName.argtypes = [C.py_object, C.c_char_p]
api.PyCapsule_IsValid.argtypes = [C.c_void_p, C.c_char_p]
CAPSULE_DESTRUCTOR = C.CFUNCTYPE(None, C.c_void_p)
api.PyCapsule_New.restype = C.py_object
api.PyCapsule_New.argtypes = [C.c_void_p, C.c_char_p, CAPSULE_DESTRUCTOR]
_get_ptr = C.PYFUNCTYPE(C.c_void_p, C.c_void_p, C.c_char_p)(("PyCapsule_GetPointer", C.pythonapi))

failures = []


def check(cond, what):
    if not cond:
        failures.append(what)
        print("FAIL:", what)


def from_numpy(arr):
    """numpy -> chutney through arr.__dlpack__(max_version=(1, 0)); returns the tensor handle."""
    cap = arr.__dlpack__(max_version=(1, 0))
    ptr = api.PyCapsule_GetPointer(cap, b"dltensor_versioned")
    api.PyCapsule_SetName(cap, b"used_dltensor_versioned")  # we own it now: the capsule must not delete
    t = C.c_void_p()
    st = lib.ctn_tensor_from_dlpack(C.cast(ptr, C.POINTER(DLManaged)), C.byref(t))
    assert st == CTN_OK, lib.ctn_last_error()
    return t


def read(t, n, dtype=np.float32):
    out = np.empty(n, dtype)
    assert lib.ctn_tensor_read(t, out.ctypes.data, out.nbytes) == CTN_OK, lib.ctn_last_error()
    return out


@CAPSULE_DESTRUCTOR
def capsule_destructor(cap):
    # An export nobody consumed: delete it (a consumer renames the capsule first).
    if api.PyCapsule_IsValid(cap, b"dltensor_versioned"):
        m = C.cast(_get_ptr(cap, b"dltensor_versioned"), C.POINTER(DLManaged))
        m.contents.deleter(m)


class Exported:
    """A chutney tensor as a DLPack producer NumPy can consume."""

    def __init__(self, t, flags=0):
        self.m = C.POINTER(DLManaged)()
        assert lib.ctn_tensor_to_dlpack(t, flags, C.byref(self.m)) == CTN_OK, lib.ctn_last_error()

    def __dlpack__(self, **kwargs):
        return api.PyCapsule_New(C.cast(self.m, C.c_void_p), b"dltensor_versioned", capsule_destructor)

    def __dlpack_device__(self):
        return (1, 0)


# 1. numpy -> chutney, zero copy, strides and byte offset: a column slice of a 3x4 matrix.
base = np.arange(12, dtype=np.float32).reshape(3, 4)
view = base[:, 1:3]
t = from_numpy(view)
check(np.array_equal(read(t, 6), view.ravel()), "values of a strided, offset numpy view")
back = Exported(t)
dl = back.m.contents.dl_tensor
check(dl.data + dl.byte_offset == view.ctypes.data, "chutney -> DLPack points at numpy's own memory")
check([dl.strides[k] for k in range(2)] == [4, 1], "strides survive the round trip")
arr = np.from_dlpack(back)
check(arr.ctypes.data == view.ctypes.data and np.array_equal(arr, view), "numpy -> chutney -> numpy is the same memory")
base[0, 1] = 42.0
check(read(t, 6)[0] == 42.0, "chutney sees numpy's later writes (no copy)")
del arr, back
lib.ctn_tensor_release(t)

# 2. chutney -> numpy, zero copy; numpy's writes are seen by chutney.
shape = (C.c_int64 * 2)(2, 3)
src = (C.c_float * 6)(*range(6))
t = C.c_void_p()
assert lib.ctn_tensor_create(CTN_F32, 2, shape, src, C.byref(t)) == CTN_OK
p = C.c_void_p()
lib.ctn_tensor_data(t, C.byref(p))
arr = np.from_dlpack(Exported(t))
check(arr.ctypes.data == p.value, "numpy's array is chutney's storage (pointer equality)")
check(arr.flags.writeable, "a chutney tensor exports writable")
arr[1, 2] = -7
check(read(t, 6)[5] == -7, "numpy's write lands in chutney's tensor")
lib.ctn_tensor_release(t)
check(arr[1, 2] == -7 and arr[0, 1] == 1, "the array keeps the storage alive after the tensor handle goes")
del arr

# 3. CTN_DLPACK_CONTIGUOUS on a non-contiguous view copies and says so.
t = from_numpy(np.arange(12, dtype=np.float32).reshape(3, 4)[:, ::2])
e = Exported(t, 1)
check(e.m.contents.flags & IS_COPIED, "IS_COPIED when a contiguous export had to copy")
c = np.from_dlpack(e)
check(c.flags.c_contiguous and np.array_equal(c, np.arange(12, dtype=np.float32).reshape(3, 4)[:, ::2]), "copied values")
e2 = Exported(t, 0)
check(not (e2.m.contents.flags & IS_COPIED), "no IS_COPIED for a zero-copy export")
del e2
lib.ctn_tensor_release(t)

# 4. Read-only arrays stay unwritten.
ro = np.arange(4, dtype=np.float32)
ro.flags.writeable = False
t = from_numpy(ro)
junk = np.full(4, 99, np.float32)
st = lib.ctn_tensor_write(t, junk.ctypes.data, junk.nbytes)
check(st == CTN_ERR_STATE and b"read-only" in lib.ctn_last_error(), "ctn_tensor_write refuses a READ_ONLY tensor")
check(np.array_equal(ro, np.arange(4, dtype=np.float32)), "the read-only array is unchanged")
e = Exported(t)
check(e.m.contents.flags & READ_ONLY, "a read-only import exports READ_ONLY")
del e
lib.ctn_tensor_release(t)

# 5. Deleter accounting with a managed tensor of our own.
deleted = [0]


@DELETER
def count_deleter(m):
    deleted[0] += 1


keep = []


def managed(arr, major=1, lanes=1, code=2, bits=32):
    m = DLManaged()
    m.major, m.minor = major, 1
    m.deleter = count_deleter
    shp = (C.c_int64 * arr.ndim)(*arr.shape)
    keep.append((shp, arr))
    m.dl_tensor = DLTensor(arr.ctypes.data, DLDevice(1, 0), arr.ndim, DLDataType(code, bits, lanes), shp, None, 0)
    keep.append(m)
    return m


data = np.arange(6, dtype=np.float32)
t = C.c_void_p()
assert lib.ctn_tensor_from_dlpack(C.pointer(managed(data)), C.byref(t)) == CTN_OK
v = C.c_void_p()
assert lib.ctn_tensor_slice(t, 0, 1, 4, 1, C.byref(v)) == CTN_OK
lib.ctn_tensor_release(t)
check(deleted[0] == 0, "the deleter waits for the last view")
check(np.array_equal(read(v, 3), [1, 2, 3]), "a view outlives its source handle")
lib.ctn_tensor_release(v)
check(deleted[0] == 1, "the deleter ran exactly once when the last view went")
for kw, what in ((dict(major=2), "DLPack major"), (dict(lanes=4), "lanes"), (dict(code=5, bits=64), "dtype")):
    before = deleted[0]
    t = C.c_void_p()
    st = lib.ctn_tensor_from_dlpack(C.pointer(managed(data, **kw)), C.byref(t))
    msg = lib.ctn_last_error().decode()
    check(st == CTN_ERR_UNSUPPORTED and t.value is None, f"an unsupported {what} is refused ({msg})")
    check(deleted[0] == before + 1, f"the deleter runs once when the {what} is refused")

# 5b. The ABI 1.5 dtypes: numpy float16 and int8 both ways without a copy, and bfloat16 (which
# numpy lacks) from a managed tensor of uint16 bit patterns; every bit kept.
lib.ctn_tensor_dtype.argtypes = [C.c_void_p, C.POINTER(C.c_int)]
CTN_F16, CTN_BF16, CTN_I8 = 6, 7, 8
for arr, want in ((np.array([[1, -2.5], [65504, np.nan]], np.float16)[:, ::-1], CTN_F16),
                  (np.array([-128, -1, 0, 127], np.int8), CTN_I8)):
    t = from_numpy(arr)
    dt = C.c_int()
    lib.ctn_tensor_dtype(t, C.byref(dt))
    check(dt.value == want, f"numpy {arr.dtype} imports as chutney dtype {want} (got {dt.value})")
    got = read(t, arr.size, arr.dtype)
    check(got.tobytes() == np.ascontiguousarray(arr).tobytes(), f"numpy {arr.dtype} (strided) values bit for bit")
    back = np.from_dlpack(Exported(t))
    check(back.dtype == arr.dtype and back.ctypes.data == arr.ctypes.data and back.strides == arr.strides,
          f"chutney {arr.dtype} exports to numpy as the same dtype, memory and strides")
    del back
    lib.ctn_tensor_release(t)
bits = np.array([0x3F80, 0xC000, 0x7F7F, 0x0001, 0x8000, 0xFF80, 0x7F81], np.uint16)
t = C.c_void_p()
check(lib.ctn_tensor_from_dlpack(C.pointer(managed(bits, code=4, bits=16)), C.byref(t)) == CTN_OK, "kDLBfloat 16 imports")
dt = C.c_int()
lib.ctn_tensor_dtype(t, C.byref(dt))
check(dt.value == CTN_BF16, f"kDLBfloat 16 is chutney's bf16 (got {dt.value})")
check(np.array_equal(read(t, bits.size, np.uint16), bits), "bf16 bit patterns kept")
e = Exported(t)
d = e.m.contents.dl_tensor.dtype
check((d.code, d.bits, d.lanes) == (4, 16, 1), f"bf16 exports as kDLBfloat 16 ({d.code}, {d.bits}, {d.lanes})")
e.m.contents.deleter(e.m)  # consumed by nobody: delete it as a consumer would
before = deleted[0]
lib.ctn_tensor_release(t)
check(deleted[0] == before + 1, "the bf16 import's deleter ran once its last user went")
keep.clear()

# 5c. PyTorch (--torch): its bfloat16, float16 and int8 tensors, strided, come in without a copy
# as chutney's bf16, f16 and i8 and go back to PyTorch as the same dtype, memory and bits.
if torch is not None:
    for tdt, want in ((torch.bfloat16, CTN_BF16), (torch.float16, CTN_F16), (torch.int8, CTN_I8)):
        src = torch.tensor([[1.0, -2.0, 0.1], [100.0, -0.0, 3.0e4 if tdt != torch.int8 else 7.0]]).to(tdt)
        x = src.t()  # strided
        cap = x.__dlpack__(max_version=(1, 0))
        ptr = api.PyCapsule_GetPointer(cap, b"dltensor_versioned")
        api.PyCapsule_SetName(cap, b"used_dltensor_versioned")
        t = C.c_void_p()
        check(lib.ctn_tensor_from_dlpack(C.cast(ptr, C.POINTER(DLManaged)), C.byref(t)) == CTN_OK, f"torch {tdt} imports")
        dt = C.c_int()
        lib.ctn_tensor_dtype(t, C.byref(dt))
        check(dt.value == want, f"torch {tdt} is chutney dtype {want} (got {dt.value})")
        raw = read(t, x.numel(), np.int8 if tdt == torch.int8 else np.uint16)
        ints = x.contiguous().view(torch.int8 if tdt == torch.int8 else torch.int16).numpy().view(raw.dtype).ravel()
        check(np.array_equal(raw, ints), f"torch {tdt} bits read row-major through the strides")
        y = torch.from_dlpack(Exported(t))
        check(y.dtype == tdt and y.data_ptr() == x.data_ptr() and y.stride() == x.stride(),
              f"chutney exports {tdt} back to PyTorch as the same dtype, memory and strides")
        check(torch.equal(y.view(torch.int8 if tdt == torch.int8 else torch.int16),
                          x.view(torch.int8 if tdt == torch.int8 else torch.int16)), f"{tdt} bits unchanged")
        del y
        lib.ctn_tensor_release(t)
    print(f"dlpack: PyTorch {torch.__version__} bfloat16, float16 and int8 exchanged")

# 6. 10,000 round trips leak neither deleters nor memory.
def rss_kb():
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * 4


big = np.ones(1 << 14, np.float32)
for i in range(10_200):
    if i == 200:
        deleted[0], start_rss = 0, rss_kb()
    t = C.c_void_p()
    assert lib.ctn_tensor_from_dlpack(C.pointer(managed(big)), C.byref(t)) == CTN_OK
    out = np.from_dlpack(Exported(t))
    lib.ctn_tensor_release(t)
    if i == 300:
        check(out.ctypes.data == big.ctypes.data, "round trip: numpy's own pointer back through chutney")
    del out
    keep.clear()  # the managed struct may go only after its deleter ran
growth = rss_kb() - start_rss
check(deleted[0] == 10_000, f"10,000 round trips ran the deleter 10,000 times ({deleted[0]})")
check(growth < 4096, f"10,000 round trips grew RSS by {growth} KiB (< 4 MiB)")

print(f"dlpack: {'FAILED' if failures else 'ok'} (numpy {np.__version__}, RSS growth {growth} KiB over 10,000 round trips)")
sys.exit(1 if failures else 0)
