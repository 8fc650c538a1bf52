package spindle

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"spindle/sdk/go/job"
	"spindle/sdk/go/proto"
)

type testJob struct {
	id    job.Id
	Host  string `json:"host"`
	panic bool
	block chan struct{}
}

func (j *testJob) Create(args map[string]any) error {
	host, ok := args["host"].(string)
	if !ok {
		return job.ErrArgNotSet{Arg: "host"}
	}
	j.Host = host
	args["ip"] = "10.0.0.7"
	return nil
}
func (j *testJob) Serialize() ([]byte, error) { return json.Marshal(j) }
func (j *testJob) Deserialize(b []byte) error { return json.Unmarshal(b, j) }
func (j *testJob) Stop() error                { close(j.block); return nil }
func (j *testJob) Status() string             { return "busy on " + j.Host }
func (j *testJob) Id() job.Id                 { return j.id }
func (j *testJob) Run(data map[string]any) (job.Return, error) {
	if j.panic {
		panic("boom")
	}
	if j.id.Type == "waits" {
		close(waiting)
		<-j.block
		return job.Return{State: proto.STATE_STOPPED}, errors.New("stopped")
	}
	data["seen"] = j.Host
	return job.Return{State: proto.STATE_COMPLETE, Stdout: "done\n"}, nil
}

// waiting is closed when the "waits" job runs (its stop handler is then in place).
var waiting = make(chan struct{})

type factory struct{}

func (factory) Make(id job.Id) (job.Job, error) {
	switch id.Type {
	case "ok", "waits":
		return &testJob{id: id, block: make(chan struct{})}, nil
	case "panics":
		return &testJob{id: id, panic: true}, nil
	}
	return nil, job.ErrUnknownJobType
}

type describing struct{ factory }

func (describing) JobTypes() []JobType {
	return []JobType{{Type: "ok", Required: []string{"host"}}}
}

// call runs serve with call on stdin; returns its lines on the protocol descriptor and
// what it wrote on stdout.
func call(t *testing.T, f job.Factory, input string) ([]map[string]any, string) {
	t.Helper()
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	var stdout, stderr bytes.Buffer
	env := map[string]string{"SPINDLE_JOB_FD": strconv.Itoa(int(w.Fd()))}
	code := serve(f, func(k string) string { return env[k] }, strings.NewReader(input), &stdout, &stderr)
	w.Close()
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr.String())
	}
	var lines []map[string]any
	scanner := bufio.NewScanner(r)
	for scanner.Scan() {
		var line map[string]any
		if err := json.Unmarshal(scanner.Bytes(), &line); err != nil {
			t.Fatalf("line %q: %v", scanner.Text(), err)
		}
		lines = append(lines, line)
		record(t, input, scanner.Bytes())
	}
	return lines, stdout.String()
}

// record appends a line the kit wrote for the call input to the file
// SPINDLE_PROTOCOL_LINES names, when it is set: Spindle's test suite checks each against
// the job protocol's schema (docs/job-protocol.schema.json).
func record(t *testing.T, input string, line []byte) {
	t.Helper()
	path := os.Getenv("SPINDLE_PROTOCOL_LINES")
	if path == "" {
		return
	}
	var call struct {
		Protocol int    `json:"protocol"`
		Call     string `json:"call"`
	}
	_ = json.Unmarshal([]byte(input), &call)
	kind := call.Call
	if call.Protocol != Protocol {
		kind = "another-protocol"
	}
	entry, err := json.Marshal(struct {
		Kit  string          `json:"kit"`
		Call string          `json:"call"`
		Line json.RawMessage `json:"line"`
	}{"go", kind, line})
	if err != nil {
		t.Fatal(err)
	}
	f, err := os.OpenFile(path, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.Write(append(entry, '\n')); err != nil {
		t.Fatal(err)
	}
}

func last(lines []map[string]any) map[string]any {
	return lines[len(lines)-1]
}

func TestDescribe(t *testing.T) {
	lines, _ := call(t, factory{}, `{"protocol":1,"call":"describe"}`)
	if msg, _ := last(lines)["error"].(string); !strings.Contains(msg, "does not list its job types") {
		t.Fatalf("a factory without JobTypes: %v", lines)
	}
	lines, _ = call(t, describing{}, `{"protocol":1,"call":"describe"}`)
	types := last(lines)["types"].([]any)
	if len(types) != 1 || types[0].(map[string]any)["type"] != "ok" {
		t.Fatalf("%v", lines)
	}
}

func TestCreateSetsArgsAndBytes(t *testing.T) {
	lines, _ := call(t, factory{}, `{"protocol":1,"call":"create","job":{"type":"ok","name":"n","id":"a","request_id":"r"},"args":{"host":"db1"}}`)
	answer := last(lines)
	if answer["protocol"].(float64) != 1 || answer["args"].(map[string]any)["ip"] != "10.0.0.7" || answer["bytes"] != "eyJob3N0IjoiZGIxIn0=" {
		t.Fatalf("%v", answer)
	}
	lines, _ = call(t, factory{}, `{"protocol":1,"call":"create","job":{"type":"ok"},"args":{}}`)
	if last(lines)["error"] != "host job arg is not set" {
		t.Fatalf("%v", lines)
	}
	lines, _ = call(t, factory{}, `{"protocol":1,"call":"create","job":{"type":"nope"}}`)
	if msg, _ := last(lines)["error"].(string); !strings.Contains(msg, "unknown job type") {
		t.Fatalf("%v", lines)
	}
}

func TestRunReturnsStateDataAndOutput(t *testing.T) {
	lines, stdout := call(t, factory{}, `{"protocol":1,"call":"run","job":{"type":"ok"},"bytes":"eyJob3N0IjoiZGIxIn0=","data":{"a":1}}`)
	answer := last(lines)
	data := answer["data"].(map[string]any)
	if answer["state"] != "COMPLETE" || data["seen"] != "db1" || data["a"].(float64) != 1 || stdout != "done\n" {
		t.Fatalf("%v %q", answer, stdout)
	}
	lines, _ = call(t, factory{}, `{"protocol":1,"call":"run","job":{"type":"panics"},"bytes":"e30="}`)
	answer = last(lines)
	if answer["state"] != "FAIL" || answer["error"] != "panic from job.Run: boom" {
		t.Fatalf("%v", answer)
	}
}

func TestAnotherProtocolVersionIsAnsweredWithOurs(t *testing.T) {
	lines, _ := call(t, factory{}, `{"protocol":2,"call":"run"}`)
	answer := last(lines)
	if answer["protocol"].(float64) != 1 || !strings.Contains(answer["error"].(string), "speaks job protocol 1") {
		t.Fatalf("%v", answer)
	}
}

func TestStatusLinesWhileRunning(t *testing.T) {
	StatusInterval = 10 * time.Millisecond
	waiting = make(chan struct{})
	done := make(chan []map[string]any)
	go func() {
		lines, _ := call(t, factory{}, `{"protocol":1,"call":"run","job":{"type":"waits"},"bytes":"eyJob3N0IjoiZGIxIn0="}`)
		done <- lines
	}()
	<-waiting
	time.Sleep(50 * time.Millisecond) // a status line or more
	// A stop is SIGTERM to the program: here, to this test process.
	p, _ := os.FindProcess(os.Getpid())
	p.Signal(os.Interrupt)
	lines := <-done
	if lines[0]["status"] != "busy on db1" || last(lines)["state"] != "STOPPED" || last(lines)["error"] != "stopped" {
		t.Fatalf("%v", lines)
	}
}
