// Package proto holds the states of Spin Cycle's proto package, with the same names and
// values, so that jobs written for Spin Cycle compile against it unchanged.
package proto

// Job and request states, as Spin Cycle numbers them.
const (
	STATE_UNKNOWN   byte = 0
	STATE_PENDING   byte = 1
	STATE_RUNNING   byte = 2
	STATE_COMPLETE  byte = 3
	STATE_FAIL      byte = 4
	STATE_RESERVED  byte = 5 // unused (formerly TIMEOUT)
	STATE_STOPPED   byte = 6
	STATE_SUSPENDED byte = 7
)

// StateName maps a state to its name ("COMPLETE").
var StateName = map[byte]string{
	STATE_UNKNOWN:   "UNKNOWN",
	STATE_PENDING:   "PENDING",
	STATE_RUNNING:   "RUNNING",
	STATE_COMPLETE:  "COMPLETE",
	STATE_FAIL:      "FAIL",
	STATE_RESERVED:  "RESERVED",
	STATE_STOPPED:   "STOPPED",
	STATE_SUSPENDED: "SUSPENDED",
}

// StateValue maps a state's name to the state.
var StateValue = map[string]byte{
	"UNKNOWN":   STATE_UNKNOWN,
	"PENDING":   STATE_PENDING,
	"RUNNING":   STATE_RUNNING,
	"COMPLETE":  STATE_COMPLETE,
	"FAIL":      STATE_FAIL,
	"RESERVED":  STATE_RESERVED,
	"STOPPED":   STATE_STOPPED,
	"SUSPENDED": STATE_SUSPENDED,
}
