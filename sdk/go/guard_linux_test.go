//go:build linux

package spindle

import (
	"bufio"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// The test binary plays three parts, chosen by GUARD_PART: the test itself; "runner", a
// stand-in for a Job Runner that starts the job program and waits; "program", which
// guards itself against the runner's death, starts a child of its own (the job's
// command) and waits too.
func TestMain(m *testing.M) {
	switch os.Getenv("GUARD_PART") {
	case "runner":
		program := exec.Command(os.Args[0])
		program.Env = append(os.Environ(), "GUARD_PART=program", fmt.Sprintf("SPINDLE_JOB_PARENT_PID=%d", os.Getpid()))
		program.Stdout = os.Stdout
		program.Stderr = os.Stderr
		program.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
		if err := program.Run(); err != nil {
			fmt.Fprintln(os.Stderr, "runner:", err)
		}
		os.Exit(0)
	case "program":
		if err := guardParent(os.Getenv("SPINDLE_JOB_PARENT_PID")); err != nil {
			fmt.Fprintln(os.Stderr, "program:", err)
			os.Exit(2)
		}
		child := exec.Command("sleep", "60")
		if err := child.Start(); err != nil {
			fmt.Fprintln(os.Stderr, "program:", err)
			os.Exit(2)
		}
		fmt.Printf("%d %d\n", os.Getpid(), child.Process.Pid)
		_ = child.Wait()
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// alive says whether pid runs (a zombie, ended but not reaped, does not).
func alive(pid int) bool {
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	text := string(stat)
	fields := strings.Fields(text[strings.LastIndex(text, ")")+1:])
	return len(fields) > 0 && fields[0] != "Z" && fields[0] != "X"
}

func TestAProgramEndsItsGroupWhenItsRunnerDies(t *testing.T) {
	runner := exec.Command(os.Args[0])
	runner.Env = append(os.Environ(), "GUARD_PART=runner")
	runner.Stderr = os.Stderr
	out, err := runner.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := runner.Start(); err != nil {
		t.Fatal(err)
	}
	line, err := bufio.NewReader(out).ReadString('\n')
	if err != nil {
		t.Fatalf("the program said nothing: %v", err)
	}
	var pids []int
	for _, word := range strings.Fields(line) {
		pid, err := strconv.Atoi(word)
		if err != nil {
			t.Fatalf("the program said %q", line)
		}
		pids = append(pids, pid)
	}
	for _, pid := range pids {
		if !alive(pid) {
			t.Fatalf("process %d is not running before the runner dies", pid)
		}
	}
	if err := runner.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	_ = runner.Wait()
	deadline := time.Now().Add(10 * time.Second)
	for _, pid := range pids {
		for alive(pid) {
			if time.Now().After(deadline) {
				syscall.Kill(pid, syscall.SIGKILL)
				t.Fatalf("process %d (of the program and its child %v) outlived its runner", pid, pids)
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
}

func TestAMalformedParentIsRefused(t *testing.T) {
	for _, parent := range []string{"runner", "1", "-4"} {
		err := guardParent(parent)
		if err == nil || !strings.Contains(err.Error(), "SPINDLE_JOB_PARENT_PID") {
			t.Errorf("guardParent(%q) = %v; expected an error naming SPINDLE_JOB_PARENT_PID", parent, err)
		}
	}
	if err := guardParent(""); err != nil {
		t.Errorf("guardParent(\"\") = %v; expected nothing to do", err)
	}
}
