// Package jobs holds three jobs written the way Spin Cycle's are: one sets an arg at
// create time that a later node uses, one reads job data an earlier job set, and one
// runs until stopped, reporting its status line.
package jobs

import (
	"encoding/json"
	"fmt"
	"strconv"
	"sync"
	"time"

	"spindle/sdk/go/job"
	"spindle/sdk/go/proto"
)

// Factory makes the jobs of this package.
var Factory job.Factory = factory{}

type factory struct{}

func (factory) Make(id job.Id) (job.Job, error) {
	switch id.Type {
	case "lookup-primary":
		return &lookupPrimary{id: id}, nil
	case "use-lease":
		return &useLease{id: id}, nil
	case "wait-until-stopped":
		return &waitUntilStopped{id: id, stop: make(chan struct{})}, nil
	}
	return nil, job.ErrUnknownJobType
}

// lookupPrimary finds a cluster's primary at create time and sets the `primary` arg for
// the nodes after it; when it runs, it takes a lease that it leaves in the job data.
type lookupPrimary struct {
	id      job.Id
	Cluster string `json:"cluster"`
	Primary string `json:"primary"`
}

func (j *lookupPrimary) Create(jobArgs map[string]any) error {
	cluster, ok := jobArgs["cluster"]
	if !ok {
		return job.ErrArgNotSet{Arg: "cluster"}
	}
	name, ok := cluster.(string)
	if !ok {
		return job.NewErrWrongArgType("cluster", cluster, "")
	}
	j.Cluster = name
	j.Primary = name + "-db1"
	jobArgs["primary"] = j.Primary
	return nil
}

func (j *lookupPrimary) Serialize() ([]byte, error)     { return json.Marshal(j) }
func (j *lookupPrimary) Deserialize(bytes []byte) error { return json.Unmarshal(bytes, j) }
func (j *lookupPrimary) Stop() error                    { return nil }
func (j *lookupPrimary) Status() string                 { return "looking up " + j.Cluster }
func (j *lookupPrimary) Id() job.Id                     { return j.id }

func (j *lookupPrimary) Run(jobData map[string]any) (job.Return, error) {
	jobData["lease"] = "lease-" + j.Cluster + "-" + j.id.RequestId
	return job.Return{
		State:  proto.STATE_COMPLETE,
		Stdout: fmt.Sprintf("primary of %s is %s\n", j.Cluster, j.Primary),
	}, nil
}

// useLease acts on the primary (an arg set by lookup-primary) with the lease an earlier
// job left in the job data.
type useLease struct {
	id      job.Id
	Primary string `json:"primary"`
}

func (j *useLease) Create(jobArgs map[string]any) error {
	primary, ok := jobArgs["primary"].(string)
	if !ok {
		return job.ErrArgNotSet{Arg: "primary"}
	}
	j.Primary = primary
	return nil
}

func (j *useLease) Serialize() ([]byte, error)     { return json.Marshal(j) }
func (j *useLease) Deserialize(bytes []byte) error { return json.Unmarshal(bytes, j) }
func (j *useLease) Stop() error                    { return nil }
func (j *useLease) Status() string                 { return "using the lease on " + j.Primary }
func (j *useLease) Id() job.Id                     { return j.id }

func (j *useLease) Run(jobData map[string]any) (job.Return, error) {
	value, ok := jobData["lease"]
	if !ok {
		err := job.ErrDataNotSet{Key: "lease"}
		return job.Return{State: proto.STATE_FAIL, Exit: 1, Error: err}, err
	}
	lease, ok := value.(string)
	if !ok {
		err := job.NewErrWrongDataType("lease", value, "")
		return job.Return{State: proto.STATE_FAIL, Exit: 1, Error: err}, err
	}
	fmt.Printf("promoting %s with %s\n", j.Primary, lease)
	return job.Return{State: proto.STATE_COMPLETE}, nil
}

// waitUntilStopped runs for `seconds` (forever when 0) or until stopped, saying how long
// it has waited.
type waitUntilStopped struct {
	id       job.Id
	Seconds  int `json:"seconds"`
	stop     chan struct{}
	stopOnce sync.Once
	mu       sync.Mutex
	status   string
}

func (j *waitUntilStopped) Create(jobArgs map[string]any) error {
	switch v := jobArgs["seconds"].(type) {
	case nil:
	case string:
		n, err := strconv.Atoi(v)
		if err != nil {
			return job.NewErrWrongArgType("seconds", v, 0)
		}
		j.Seconds = n
	case float64:
		j.Seconds = int(v)
	default:
		return job.NewErrWrongArgType("seconds", v, 0)
	}
	return nil
}

func (j *waitUntilStopped) Serialize() ([]byte, error)     { return json.Marshal(j) }
func (j *waitUntilStopped) Deserialize(bytes []byte) error { return json.Unmarshal(bytes, j) }
func (j *waitUntilStopped) Id() job.Id                     { return j.id }

func (j *waitUntilStopped) Stop() error {
	j.stopOnce.Do(func() { close(j.stop) })
	return nil
}

func (j *waitUntilStopped) Status() string {
	j.mu.Lock()
	defer j.mu.Unlock()
	return j.status
}

func (j *waitUntilStopped) Run(jobData map[string]any) (job.Return, error) {
	started := time.Now()
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	for {
		waited := time.Since(started)
		j.mu.Lock()
		j.status = fmt.Sprintf("waited %ds", int(waited.Seconds()))
		j.mu.Unlock()
		if j.Seconds > 0 && waited >= time.Duration(j.Seconds)*time.Second {
			return job.Return{State: proto.STATE_COMPLETE}, nil
		}
		select {
		case <-j.stop:
			return job.Return{State: proto.STATE_STOPPED, Error: fmt.Errorf("stopped after %s", waited.Round(time.Second))}, nil
		case <-tick.C:
		}
	}
}
