package chutney

// The enums of the headers, in one place: each Go type mirrors a C enum and each constant takes
// its value from the header (cgo), so the two cannot drift.

/*
#include "shim.h"
*/
import "C"

// Status is a chutney status code (ctn_status).
type Status int32

// The status codes of types.h.
const (
	StatusOK              Status = C.CTN_OK
	StatusInvalidArgument Status = C.CTN_ERR_INVALID_ARGUMENT
	StatusShape           Status = C.CTN_ERR_SHAPE
	StatusDType           Status = C.CTN_ERR_DTYPE
	StatusOutOfMemory     Status = C.CTN_ERR_OUT_OF_MEMORY
	StatusUnavailable     Status = C.CTN_ERR_UNAVAILABLE
	StatusUnsupported     Status = C.CTN_ERR_UNSUPPORTED
	StatusPlugin          Status = C.CTN_ERR_PLUGIN
	StatusIO              Status = C.CTN_ERR_IO
	StatusCorrupt         Status = C.CTN_ERR_CORRUPT
	StatusState           Status = C.CTN_ERR_STATE
	StatusInternal        Status = C.CTN_ERR_INTERNAL
	StatusCancelled       Status = C.CTN_ERR_CANCELLED // since ABI 1.3
	StatusNumerics        Status = C.CTN_ERR_NUMERICS  // since ABI 1.3
)

// DType is an element type (ctn_dtype).
type DType int32

// The element types. Bool is one byte per element, 0 or 1, like Go's bool. Float16 (IEEE
// binary16) and BFloat16 have no Go type: their elements cross as uint16 bit patterns
// (NewHalfTensor, Tensor.HalfBits; F16ToFloat32 and the other converters in half.go).
const (
	Float32  DType = C.CTN_F32
	Float64  DType = C.CTN_F64
	Int32    DType = C.CTN_I32
	Int64    DType = C.CTN_I64
	Uint8    DType = C.CTN_U8
	Bool     DType = C.CTN_BOOL
	Float16  DType = C.CTN_F16  // since ABI 1.5
	BFloat16 DType = C.CTN_BF16 // since ABI 1.5
	Int8     DType = C.CTN_I8   // since ABI 1.5
	Int16    DType = C.CTN_I16  // since ABI 1.6
	Uint16   DType = C.CTN_U16  // since ABI 1.6
	Uint32   DType = C.CTN_U32  // since ABI 1.6
	Uint64   DType = C.CTN_U64  // since ABI 1.6
)

// Init is a weight initialiser (ctn_init).
type Init int32

// The initialisers of nn.h.
const (
	InitZeros          Init = C.CTN_INIT_ZEROS
	InitOnes           Init = C.CTN_INIT_ONES
	InitKaimingUniform Init = C.CTN_INIT_KAIMING_UNIFORM
	InitKaimingNormal  Init = C.CTN_INIT_KAIMING_NORMAL
	InitXavierUniform  Init = C.CTN_INIT_XAVIER_UNIFORM
	InitXavierNormal   Init = C.CTN_INIT_XAVIER_NORMAL
	InitUniform        Init = C.CTN_INIT_UNIFORM
	InitNormal         Init = C.CTN_INIT_NORMAL
)

// LayerKind is the kind of a Layer of Sequential.
type LayerKind int32

// Layer kinds of nn.h.
const (
	LayerLinear    LayerKind = C.CTN_LAYER_LINEAR
	LayerConv2D    LayerKind = C.CTN_LAYER_CONV2D
	LayerBatchNorm LayerKind = C.CTN_LAYER_BATCH_NORM
	LayerDropout   LayerKind = C.CTN_LAYER_DROPOUT
	LayerReLU      LayerKind = C.CTN_LAYER_RELU
	LayerTanh      LayerKind = C.CTN_LAYER_TANH
	LayerSigmoid   LayerKind = C.CTN_LAYER_SIGMOID
	LayerMaxPool2D LayerKind = C.CTN_LAYER_MAX_POOL2D
	LayerAvgPool2D LayerKind = C.CTN_LAYER_AVG_POOL2D
	LayerFlatten   LayerKind = C.CTN_LAYER_FLATTEN
	LayerLayerNorm LayerKind = C.CTN_LAYER_LAYER_NORM
)
