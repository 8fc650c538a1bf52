// Package job is Spin Cycle's job interface (module github.com/square/spincycle/v2, package
// job), with the same exported names, fields and method sets, so that a Spin Cycle jobs
// repository compiles against it with its import paths changed. Serve (in this module's
// root package) makes a program of a Factory that Spindle runs over its job protocol.
package job

import (
	"errors"
	"fmt"
	"reflect"
)

// A Job is one unit of work. The Request Manager makes it and calls Create with its job
// args (which it may change: the args it sets are read by later nodes), then Serialize;
// the Job Runner makes it again, calls Deserialize with those bytes and Run with the
// chain's job data (which it may change for the jobs after it). Stop asks a running job
// to end; Status says what it is doing.
type Job interface {
	Create(jobArgs map[string]any) error
	Serialize() ([]byte, error)
	Deserialize([]byte) error
	Run(jobData map[string]any) (Return, error)
	Stop() error
	Status() string
	Id() Id
}

// A Factory makes jobs by their Id's Type.
type Factory interface {
	Make(id Id) (Job, error)
}

// Id names a job: its type, its name in the spec, its id within the request, and the
// request's id.
type Id struct {
	Type      string
	Name      string
	Id        string
	RequestId string
}

// NewId makes an Id without a request id.
func NewId(jobType, jobName, jobId string) Id {
	return Id{Type: jobType, Name: jobName, Id: jobId}
}

// NewIdWithRequestId makes an Id.
func NewIdWithRequestId(jobType, jobName, jobId, requestId string) Id {
	return Id{Type: jobType, Name: jobName, Id: jobId, RequestId: requestId}
}

// Return is the end of one try: its state (proto.STATE_COMPLETE on success), its exit
// code, its error and its output.
type Return struct {
	State  byte
	Exit   int64
	Error  error
	Stdout string
	Stderr string
}

var (
	// ErrUnknownJobType is what a Factory returns for a type it does not make.
	ErrUnknownJobType = errors.New("unknown job type")
	// ErrRunTimeout is what a job may return when its run timed out.
	ErrRunTimeout = errors.New("run timeout")
	// ErrWrongJobId is what a job may return when it is given another job's id.
	ErrWrongJobId = errors.New("wrong job id")
)

// ErrArgNotSet says that a required job arg is missing.
type ErrArgNotSet struct {
	Arg string
}

func (e ErrArgNotSet) Error() string {
	return fmt.Sprintf("%s job arg is not set", e.Arg)
}

// ErrDataNotSet says that a job data key a job needs is missing.
type ErrDataNotSet struct {
	Key string
}

func (e ErrDataNotSet) Error() string {
	return fmt.Sprintf("%s job data is not set", e.Key)
}

// ErrWrongDataType says that a job data value has another type than expected.
type ErrWrongDataType struct {
	Key        string
	GotType    reflect.Type
	ExpectType reflect.Type
}

// NewErrWrongDataType says that the job data value at key is gotValue, not of
// expectValue's type.
func NewErrWrongDataType(key string, gotValue, expectValue any) ErrWrongDataType {
	return ErrWrongDataType{Key: key, GotType: reflect.TypeOf(gotValue), ExpectType: reflect.TypeOf(expectValue)}
}

func (e ErrWrongDataType) Error() string {
	return fmt.Sprintf("%s job data value is type %v, expected %v", e.Key, e.GotType, e.ExpectType)
}

// ErrWrongArgType says that a job arg has another type than expected.
type ErrWrongArgType struct {
	Key        string
	GotType    reflect.Type
	ExpectType reflect.Type
}

// NewErrWrongArgType says that the job arg at key is gotValue, not of expectValue's type.
func NewErrWrongArgType(key string, gotValue, expectValue any) ErrWrongArgType {
	return ErrWrongArgType{Key: key, GotType: reflect.TypeOf(gotValue), ExpectType: reflect.TypeOf(expectValue)}
}

func (e ErrWrongArgType) Error() string {
	return fmt.Sprintf("%s job arg value is type %v, expected %v", e.Key, e.GotType, e.ExpectType)
}
