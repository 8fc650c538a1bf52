// Package spindle makes a program of a job.Factory: Spindle runs the program for each
// call of its job protocol (docs/job-protocol.md in Spindle's repository), version 1.
//
//	func main() { spindle.Serve(jobs.Factory) }
//
// The call is in the environment (SPINDLE_JOB_CALL) and on stdin (one JSON document);
// the answer, and status lines while a job runs, go to the descriptor SPINDLE_JOB_FD
// names, one JSON object a line, so that stdout and stderr stay the job's own output.
package spindle

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strconv"
	"sync"
	"syscall"
	"time"

	"spindle/sdk/go/job"
	"spindle/sdk/go/proto"
)

// Protocol is the version of the job protocol this kit speaks.
const Protocol = 1

// StatusInterval is how often a running job's Status is read; a changed status line is
// sent to Spindle (spindle ps shows it).
var StatusInterval = 250 * time.Millisecond

// JobType describes one job type for `describe`: Spindle's linter checks that job nodes
// of the type pass its Required args.
type JobType struct {
	Type     string   `json:"type"`
	Required []string `json:"required,omitempty"`
	Optional []string `json:"optional,omitempty"`
}

// A Describer is a Factory that lists its job types. Spin Cycle's factories do not, so
// it is optional: without it, Spindle's config names the types (`types:` of the program's
// entry under `jobs:`).
type Describer interface {
	JobTypes() []JobType
}

// Serve answers the call Spindle made of this program and exits: 0 when it answered
// (whatever the job's state), 2 when it is not run by Spindle or cannot answer.
//
// When the Job Runner does not supervise the program (SPINDLE_JOB_PARENT_PID is set), the
// program kills its own process group if the runner dies.
func Serve(factory job.Factory) {
	if err := guardParent(os.Getenv("SPINDLE_JOB_PARENT_PID")); err != nil {
		fmt.Fprintf(os.Stderr, "spindle: %v\n", err)
		os.Exit(2)
	}
	os.Exit(serve(factory, os.Getenv, os.Stdin, os.Stdout, os.Stderr))
}

type idMsg struct {
	Type      string `json:"type"`
	Name      string `json:"name"`
	Id        string `json:"id"`
	RequestId string `json:"request_id"`
}

// callMsg is the call on stdin (any of the three: docs/job-protocol.schema.json, $defs
// describeCall, createCall and runCall).
type callMsg struct {
	Protocol int            `json:"protocol"`
	Call     string         `json:"call"`
	Job      idMsg          `json:"job"`
	Args     map[string]any `json:"args"`
	Sets     []string       `json:"sets"`
	Bytes    []byte         `json:"bytes"`
	Data     map[string]any `json:"data"`
}

// The lines written on the protocol descriptor, one type each (the schema's $defs of the
// same names).

// failure fails a call with the program's own words.
type failure struct {
	Protocol int    `json:"protocol"`
	Error    string `json:"error"`
}

type describeAnswer struct {
	Protocol int       `json:"protocol"`
	Types    []JobType `json:"types"`
}

type createAnswer struct {
	Protocol int            `json:"protocol"`
	Args     map[string]any `json:"args"`
	Bytes    []byte         `json:"bytes"`
}

type runAnswer struct {
	Protocol int            `json:"protocol"`
	State    string         `json:"state"`
	Exit     int64          `json:"exit"`
	Error    string         `json:"error"`
	Data     map[string]any `json:"data"`
}

type statusLine struct {
	Status string `json:"status"`
}

// lines writes one JSON object a line, from any goroutine.
type lines struct {
	mu  sync.Mutex
	enc *json.Encoder
}

func (l *lines) write(v any) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.enc.Encode(v)
}

func failed(err string) failure {
	return failure{Protocol: Protocol, Error: err}
}

func serve(factory job.Factory, getenv func(string) string, stdin io.Reader, stdout, stderr io.Writer) int {
	fdText := getenv("SPINDLE_JOB_FD")
	fd, err := strconv.Atoi(fdText)
	if err != nil || fd < 0 {
		fmt.Fprintf(stderr, "this is a Spindle job program: Spindle runs it for its job types (SPINDLE_JOB_FD is %q; expected a descriptor number)\n", fdText)
		return 2
	}
	out := &lines{enc: json.NewEncoder(os.NewFile(uintptr(fd), "spindle-job-protocol"))}
	var call callMsg
	if err := json.NewDecoder(stdin).Decode(&call); err != nil {
		return finish(out, stderr, failed(fmt.Sprintf("cannot read the call on stdin: %v", err)))
	}
	if call.Protocol != Protocol {
		return finish(out, stderr, failed(fmt.Sprintf("this Go kit speaks job protocol %d; the call is protocol %d", Protocol, call.Protocol)))
	}
	switch call.Call {
	case "describe":
		return finish(out, stderr, describe(factory))
	case "create":
		return finish(out, stderr, create(factory, call))
	case "run":
		return finish(out, stderr, run(factory, call, out, stdout, stderr))
	default:
		return finish(out, stderr, failed(fmt.Sprintf("unknown call %q; expected describe, create or run", call.Call)))
	}
}

func finish(out *lines, stderr io.Writer, msg any) int {
	if err := out.write(msg); err != nil {
		fmt.Fprintf(stderr, "cannot write the answer: %v\n", err)
		return 2
	}
	return 0
}

func describe(factory job.Factory) any {
	d, ok := factory.(Describer)
	if !ok {
		return failed("this program's factory does not list its job types (it is not a spindle.Describer)")
	}
	types := d.JobTypes()
	if types == nil {
		types = []JobType{}
	}
	return describeAnswer{Protocol: Protocol, Types: types}
}

func makeJob(factory job.Factory, call callMsg) (j job.Job, err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("panic from factory.Make: %v", r)
		}
	}()
	j, err = factory.Make(job.NewIdWithRequestId(call.Job.Type, call.Job.Name, call.Job.Id, call.Job.RequestId))
	if err == nil && j == nil {
		err = fmt.Errorf("factory.Make returned no job for type %q", call.Job.Type)
	}
	return j, err
}

func create(factory job.Factory, call callMsg) (msg any) {
	defer func() {
		if r := recover(); r != nil {
			msg = failed(fmt.Sprintf("panic from job.Create: %v", r))
		}
	}()
	j, err := makeJob(factory, call)
	if err != nil {
		return failed(fmt.Sprintf("cannot make job type %q: %v", call.Job.Type, err))
	}
	args := call.Args
	if args == nil {
		args = map[string]any{}
	}
	if err := j.Create(args); err != nil {
		return failed(err.Error())
	}
	bytes, err := j.Serialize()
	if err != nil {
		return failed(fmt.Sprintf("job.Serialize: %v", err))
	}
	return createAnswer{Protocol: Protocol, Args: args, Bytes: bytes}
}

func run(factory job.Factory, call callMsg, out *lines, stdout, stderr io.Writer) runAnswer {
	j, err := makeJob(factory, call)
	if err != nil {
		return ended(proto.STATE_FAIL, 1, fmt.Sprintf("cannot make job type %q: %v", call.Job.Type, err), call.Data)
	}
	if err := j.Deserialize(call.Bytes); err != nil {
		return ended(proto.STATE_FAIL, 1, fmt.Sprintf("job.Deserialize: %v", err), call.Data)
	}
	data := call.Data
	if data == nil {
		data = map[string]any{}
	}
	// A stop is SIGTERM (or SIGINT) to the program: the job's Stop is called.
	signals := make(chan os.Signal, 1)
	signal.Notify(signals, syscall.SIGTERM, syscall.SIGINT)
	defer signal.Stop(signals)
	done := make(chan struct{})
	var watchers sync.WaitGroup
	watchers.Add(1)
	go func() {
		defer watchers.Done()
		select {
		case <-signals:
			_ = j.Stop()
		case <-done:
		}
	}()
	watchers.Add(1)
	go func() {
		defer watchers.Done()
		reportStatus(j, out, done)
	}()
	ret, runErr := runJob(j, data)
	close(done)
	watchers.Wait()
	// The job's output, which its Return carries: a write that fails is said on stderr
	// (the try's end is answered all the same).
	if ret.Stdout != "" {
		if _, err := io.WriteString(stdout, ret.Stdout); err != nil {
			fmt.Fprintf(stderr, "spindle: cannot write the job's stdout: %v\n", err)
		}
	}
	if ret.Stderr != "" {
		if _, err := io.WriteString(stderr, ret.Stderr); err != nil {
			fmt.Fprintf(os.Stderr, "spindle: cannot write the job's stderr: %v\n", err)
		}
	}
	// As Spin Cycle's runner: Run's error, else the Return's.
	text := ""
	if runErr != nil {
		text = runErr.Error()
	} else if ret.Error != nil {
		text = ret.Error.Error()
	}
	return ended(ret.State, ret.Exit, text, data)
}

func runJob(j job.Job, data map[string]any) (ret job.Return, err error) {
	defer func() {
		if r := recover(); r != nil {
			ret = job.Return{State: proto.STATE_FAIL, Exit: 1}
			err = fmt.Errorf("panic from job.Run: %v", r)
		}
	}()
	return j.Run(data)
}

func reportStatus(j job.Job, out *lines, done <-chan struct{}) {
	ticker := time.NewTicker(StatusInterval)
	defer ticker.Stop()
	last := ""
	for {
		select {
		case <-done:
			return
		case <-ticker.C:
			if status := j.Status(); status != last {
				last = status
				_ = out.write(statusLine{Status: status})
			}
		}
	}
}

func ended(state byte, exit int64, err string, data map[string]any) runAnswer {
	name, ok := proto.StateName[state]
	if !ok {
		name = "UNKNOWN"
	}
	return runAnswer{Protocol: Protocol, State: name, Exit: exit, Error: err, Data: data}
}
