package sandbox

import (
	"encoding/json"
	"fmt"
	"os"

	"golang.org/x/sys/unix"
)

// message is one control-socket message between the supervisor and the init.
type message struct {
	Spec      *Spec    `json:"spec,omitempty"`      // supervisor → init, first
	Paths     []string `json:"paths,omitempty"`     // supervisor → init, with the spec: O_PATH fds of these
	Tun       bool     `json:"tun,omitempty"`       // supervisor → init, with the spec: the last fd is /dev/net/tun, opened in the sandbox's network namespace
	Listeners []string `json:"listeners,omitempty"` // init → supervisor, with the fds
	Go        bool     `json:"go,omitempty"`        // supervisor → init: serving; start the target
	Started   int      `json:"started,omitempty"`   // init → supervisor: the target's pid inside
	Exited    *int     `json:"exited,omitempty"`    // init → supervisor, last: the target's exit status
	Breach    string   `json:"breach,omitempty"`    // init → supervisor, with Exited: a bound the init killed the sandbox for
	Step      string   `json:"step,omitempty"`      // init → supervisor: the step that failed
	Error     string   `json:"error,omitempty"`
}

// maxMessage bounds one control message; a Spec with a large environment
// still fits.
const maxMessage = 1 << 20

// control is one end of the SOCK_SEQPACKET socketpair. Each message is one
// packet, so there is no framing to get wrong.
type control struct{ f *os.File }

func (c control) send(m message, fds ...int) error {
	data, err := json.Marshal(m)
	if err != nil {
		return err
	}
	var oob []byte
	if len(fds) > 0 {
		oob = unix.UnixRights(fds...)
	}
	return unix.Sendmsg(int(c.f.Fd()), data, oob, nil, 0)
}

func (c control) recv() (message, []int, error) {
	buf := make([]byte, maxMessage)
	oob := make([]byte, unix.CmsgSpace(16*4))
	n, oobn, flags, _, err := unix.Recvmsg(int(c.f.Fd()), buf, oob, unix.MSG_CMSG_CLOEXEC)
	if err != nil {
		return message{}, nil, err
	}
	if n == 0 {
		return message{}, nil, fmt.Errorf("control socket closed")
	}
	if flags&(unix.MSG_TRUNC|unix.MSG_CTRUNC) != 0 {
		return message{}, nil, fmt.Errorf("control message truncated")
	}
	var fds []int
	if oobn > 0 {
		cmsgs, err := unix.ParseSocketControlMessage(oob[:oobn])
		if err != nil {
			return message{}, nil, err
		}
		for _, cm := range cmsgs {
			got, err := unix.ParseUnixRights(&cm)
			if err != nil {
				return message{}, nil, err
			}
			fds = append(fds, got...)
		}
	}
	var m message
	if err := json.Unmarshal(buf[:n], &m); err != nil {
		for _, fd := range fds {
			unix.Close(fd)
		}
		return message{}, nil, err
	}
	return m, fds, nil
}
