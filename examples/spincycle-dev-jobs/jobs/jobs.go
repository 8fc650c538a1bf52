// Package jobs is a factory of the shape of Spin Cycle's dev jobs, as Spin Cycle 2.1.1's
// own Job Runner has them compiled in: the same type names, the same job args and the
// same bytes, so that chains either system built or suspended run on the other.
//
//   - noop: does nothing; no bytes.
//   - sleep: its `duration` arg is a string of milliseconds (`ms` is appended and the
//     result parsed as a Go duration); stored as {"duration": N}, N a time.Duration
//     (nanoseconds); stopped, it ends STOPPED.
//   - shell-command: its `cmd` arg is the program and its `args` arg is split on white
//     space; stored as {"cmd": "...", "args": ["..."]}; a non-zero exit is FAIL with exit 1
//     and the error Go's exec gives ("exit status N").
package jobs

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os/exec"
	"strings"
	"sync"
	"time"

	"spindle/sdk/go/job"
	"spindle/sdk/go/proto"
)

// Factory makes noop, sleep and shell-command jobs.
var Factory job.Factory = factory{}

type factory struct{}

func (factory) Make(id job.Id) (job.Job, error) {
	switch id.Type {
	case "noop":
		return &noop{id: id}, nil
	case "sleep":
		return &sleep{id: id, stop: make(chan struct{})}, nil
	case "shell-command":
		return &shellCommand{id: id}, nil
	}
	return nil, job.ErrUnknownJobType
}

type noop struct{ id job.Id }

func (j *noop) Create(map[string]any) error { return nil }
func (j *noop) Serialize() ([]byte, error)  { return nil, nil }
func (j *noop) Deserialize([]byte) error    { return nil }
func (j *noop) Stop() error                 { return nil }
func (j *noop) Status() string              { return "nop" }
func (j *noop) Id() job.Id                  { return j.id }
func (j *noop) Run(map[string]any) (job.Return, error) {
	return job.Return{State: proto.STATE_COMPLETE}, nil
}

type sleep struct {
	id       job.Id
	Duration time.Duration `json:"duration"`
	stop     chan struct{}
	once     sync.Once
}

func (j *sleep) Create(jobArgs map[string]any) error {
	value, ok := jobArgs["duration"]
	if !ok {
		return job.ErrArgNotSet{Arg: "duration"}
	}
	text, ok := value.(string)
	if !ok {
		return job.NewErrWrongArgType("duration", value, "string")
	}
	duration, err := time.ParseDuration(text + "ms")
	if err != nil {
		return fmt.Errorf("duration %q: %s", text, err)
	}
	j.Duration = duration
	return nil
}

func (j *sleep) Serialize() ([]byte, error)    { return json.Marshal(j) }
func (j *sleep) Deserialize(data []byte) error { return json.Unmarshal(data, j) }
func (j *sleep) Status() string                { return "sleeping " + j.Duration.String() }
func (j *sleep) Id() job.Id                    { return j.id }

func (j *sleep) Stop() error {
	j.once.Do(func() { close(j.stop) })
	return nil
}

func (j *sleep) Run(map[string]any) (job.Return, error) {
	select {
	case <-time.After(j.Duration):
		return job.Return{State: proto.STATE_COMPLETE}, nil
	case <-j.stop:
		return job.Return{State: proto.STATE_STOPPED}, nil
	}
}

type shellCommand struct {
	id   job.Id
	Cmd  string   `json:"cmd"`
	Args []string `json:"args,omitempty"`
}

func (j *shellCommand) Create(jobArgs map[string]any) error {
	cmd, ok := jobArgs["cmd"].(string)
	if !ok {
		return job.ErrArgNotSet{Arg: "cmd"}
	}
	j.Cmd = cmd
	if args, ok := jobArgs["args"].(string); ok {
		j.Args = strings.Fields(args)
	}
	return nil
}

func (j *shellCommand) Serialize() ([]byte, error)    { return json.Marshal(j) }
func (j *shellCommand) Deserialize(data []byte) error { return json.Unmarshal(data, j) }
func (j *shellCommand) Stop() error                   { return nil }
func (j *shellCommand) Status() string                { return "running " + j.Cmd }
func (j *shellCommand) Id() job.Id                    { return j.id }

func (j *shellCommand) Run(map[string]any) (job.Return, error) {
	var stdout, stderr bytes.Buffer
	cmd := exec.Command(j.Cmd, j.Args...)
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	ret := job.Return{State: proto.STATE_COMPLETE, Error: err, Stdout: stdout.String(), Stderr: stderr.String()}
	if err != nil {
		ret.State, ret.Exit = proto.STATE_FAIL, 1
	}
	return ret, nil
}
