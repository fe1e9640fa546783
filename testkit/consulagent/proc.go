package consulagent

import (
	"os/exec"
	"runtime"
	"time"
)

// process is one run of the Consul binary.
type process struct {
	cmd  *exec.Cmd
	done chan struct{} // closed once the process has exited and was reaped
	err  error         // cmd.Wait's result, set before done is closed
}

// startProcess starts cmd from a goroutine that stays on its OS thread until
// the process exits. On Linux the child gets SIGKILL when the thread that
// started it dies (Pdeathsig), so that a test binary killed by a timeout
// leaves no orphan agent behind; keeping that thread alive (and locked to
// this goroutine) for the child's whole life is what stops the Go runtime
// from retiring it early and killing a healthy agent.
func startProcess(cmd *exec.Cmd) (*process, error) {
	setProcAttr(cmd)
	p := &process{cmd: cmd, done: make(chan struct{})}
	started := make(chan error, 1)
	go func() {
		if lockThread {
			// Never unlocked on purpose: when this goroutine ends the thread
			// ends with it, and by then the child is already gone.
			runtime.LockOSThread()
		}
		if err := cmd.Start(); err != nil {
			started <- err
			return
		}
		started <- nil
		p.err = cmd.Wait()
		close(p.done)
	}()
	if err := <-started; err != nil {
		return nil, err
	}
	return p, nil
}

func (p *process) exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// waitErr returns how the process ended; call it only once exited.
func (p *process) waitErr() error {
	<-p.done
	return p.err
}

// stop asks the process to terminate, kills it after grace (at once when
// grace is 0) and waits until it was reaped.
func (p *process) stop(grace time.Duration) {
	if p.exited() {
		return
	}
	if grace > 0 {
		terminate(p.cmd)
		select {
		case <-p.done:
			return
		case <-time.After(grace):
		}
	}
	kill(p.cmd)
	<-p.done
}
