// Package localmode owns what the bridge's local mode (make run) keeps
// between runs: the token its shells, CI scripts and UI sessions use, the
// addresses they were told, and the env file a second terminal sources.
//
// The contract: with a data directory, a restart keeps the same token and,
// when they are still free, the same addresses, so the export lines a
// terminal sourced, a git remote added from the git view and a UI session
// made before the restart all keep working. Without one, nothing outlives
// the process: the token lives in a private temporary directory that
// Close removes. The env file is replaced whole, and only by a run that
// is listening: a second run that can't bind never empties the first
// one's. It also starts the embedded GCS emulator at the address the
// last run kept, and seeds a bucket with the example apps without
// touching an app that has releases.
package localmode

import (
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"os"
	"path/filepath"
	"strings"

	"github.com/google/renameio/v2"
)

// stateDir is local mode's own directory inside the data directory, beside
// the emulator's bucket.
const stateDir = "local"

// State is one run's local mode state. Open reads it; nothing is written
// until Save, so that the emulator, which wants an empty directory to
// start a new bucket in, starts first.
type State struct {
	dir   string // where the token and addresses are kept
	temp  bool   // dir is this process's own, removed by Close
	token string
	fresh bool              // the token is new: Save writes it
	addrs map[string]string // name -> address, as Save will keep them
}

// Open returns the state kept in dataDir, with a new token when it has
// none; an empty dataDir gives a state of this process only.
func Open(dataDir string) (*State, error) {
	s := &State{addrs: map[string]string{}}
	if dataDir == "" {
		dir, err := os.MkdirTemp("", "bucketops-local-")
		if err != nil {
			return nil, err
		}
		s.dir, s.temp = dir, true
	} else {
		s.dir = filepath.Join(dataDir, stateDir)
		if data, err := os.ReadFile(s.addrsFile()); err == nil {
			_ = json.Unmarshal(data, &s.addrs) // a broken file is forgotten, not fatal
		}
	}
	data, err := os.ReadFile(s.TokenFile())
	switch {
	case err == nil:
		s.token = strings.TrimSpace(string(data))
		if len(s.token) < 32 {
			s.Close()
			return nil, fmt.Errorf("local mode: the token kept in %s is shorter than 32 characters: delete the file to make a new one", s.TokenFile())
		}
	case errors.Is(err, fs.ErrNotExist):
		secret := make([]byte, 32)
		if _, err := rand.Read(secret); err != nil {
			s.Close()
			return nil, err
		}
		s.token, s.fresh = hex.EncodeToString(secret), true
	default:
		s.Close()
		return nil, fmt.Errorf("local mode: %w", err)
	}
	return s, nil
}

// Close removes the state of a run without a data directory.
func (s *State) Close() {
	if s.temp {
		os.RemoveAll(s.dir)
	}
}

// TokenFile is the file holding the token (one line, hex), there once
// Save returned.
func (s *State) TokenFile() string { return filepath.Join(s.dir, "token") }

// Token is the token's value.
func (s *State) Token() string { return s.token }

// addrsFile keeps the addresses of the last run, by name.
func (s *State) addrsFile() string { return filepath.Join(s.dir, "addresses.json") }

// Listen listens on addr; when addr asks for any free port (port 0) and
// the last run with this data directory listened for name on an address
// that is still free, it listens there again. Save remembers where.
func (s *State) Listen(name, addr string) (net.Listener, error) {
	if _, port, err := net.SplitHostPort(addr); err == nil && port == "0" {
		if last := s.addrs[name]; last != "" {
			if ln, err := net.Listen("tcp", last); err == nil {
				return ln, nil
			}
		}
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, err
	}
	s.addrs[name] = ln.Addr().String()
	return ln, nil
}

// Addr is the address name last listened on with this data directory, or
// fallback.
func (s *State) Addr(name, fallback string) string {
	if last := s.addrs[name]; last != "" {
		return last
	}
	return fallback
}

// Set records the address name listens on, for Save.
func (s *State) Set(name, addr string) { s.addrs[name] = addr }

// Save writes the token, when it is new, and the addresses.
func (s *State) Save() error {
	if err := os.MkdirAll(s.dir, 0o700); err != nil {
		return fmt.Errorf("local mode: %w", err)
	}
	if s.fresh {
		if err := renameio.WriteFile(s.TokenFile(), []byte(s.token+"\n"), 0o600); err != nil {
			return fmt.Errorf("local mode: %w", err)
		}
		s.fresh = false
	}
	if s.temp {
		return nil
	}
	data, err := json.MarshalIndent(s.addrs, "", "  ")
	if err != nil {
		return err
	}
	if err := renameio.WriteFile(s.addrsFile(), append(data, '\n'), 0o600); err != nil {
		return fmt.Errorf("local mode: %w", err)
	}
	return nil
}

// WriteEnv replaces the env file at path with content, whole: a reader
// sees the old file or the new one, never an empty or partial one.
func WriteEnv(path, content string) error {
	if path == "" {
		return nil
	}
	if err := renameio.WriteFile(path, []byte(content), 0o644); err != nil {
		return fmt.Errorf("--env-file: %w", err)
	}
	return nil
}
