// Package chutney is the Go binding of chutney, a deep-learning runtime behind a C ABI: build a
// graph of tensor ops, differentiate it (Grad), compile it into a Plan and run the plan many
// times with new inputs; or run ops one at a time on an eager graph. The layer library
// (Model), the data loader (Dataset, Loader) and checkpoints (SaveCheckpoint, LoadCheckpoint)
// are here too.
//
// # Handles
//
// Context, Graph, Plan, Tensor, Model, Dataset, Loader and Checkpoint wrap C objects. Close
// releases one; it is idempotent and safe to call while another goroutine is inside a call on
// the same handle (the release waits for that call). A closed handle refuses every call with an
// error that matches ErrClosed. Handles that depend on another keep it alive: a Graph or Plan
// holds its Context, a Model its Graph, so closing them in any order is safe, and the C object
// is freed when the last dependant is closed. Nothing is freed by the garbage collector: a
// handle that is never closed leaks, and the leak detector (SetLeakHandler, or the environment
// variable CHUTNEY_GO_LEAKS=1) reports such handles when they are collected. OpenHandles counts
// the handles not yet closed.
//
// # Threads
//
// A Context, Dataset and Checkpoint may be used from several goroutines at once, and so may a
// Plan: its calls are serialised by a mutex of its own (the library runs one call per plan at a
// time), so goroutines sharing a plan take turns. A Graph, Model or Loader, and a Tensor being
// written, must not be used by two goroutines at the same time (distinct ones may). See
// docs/GO.md. The C error message is read in the same C call as the
// failing function, so errors are right whatever OS thread a goroutine runs on.
//
// # Errors
//
// Every error is a *Error carrying the library's status, its name and the message; compare
// with errors.Is(err, chutney.ErrShape) and friends. Building calls (the Graph and Model
// methods that add nodes) return only the new Node and record the first failure in the graph,
// as bufio.Writer does: check Graph.Err, or the error of Compile, which returns it.
//
// # Memory
//
// Tensors copy Go slices in (NewTensor, Write) and out (Values, Read); C never keeps a pointer
// to Go memory after a call returns.
package chutney

//go:generate go run ../internal/genabi -root ../../..
