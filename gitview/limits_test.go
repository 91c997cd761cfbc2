package gitview_test

import (
	"bytes"
	"compress/gzip"
	"context"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
)

// A request a git client never sends — millions of haves, compressed to
// fit the body cap — is refused before it is parsed into memory, with a
// message saying which cap it went over; a real fetch still works.
func TestOversizedUploadPackRequestsAreRefused(t *testing.T) {
	r := newRepo(t, nil)
	res := r.publish(t, "prod/a", 1, "ci", "")
	sha, err := r.view.Commit(context.Background(), "prod/a", res.Generation)
	if err != nil {
		t.Fatal(err)
	}
	pkt := func(b *bytes.Buffer, s string) { fmt.Fprintf(b, "%04x%s", len(s)+4, s) }
	request := func(wants, shallows, haves int) []byte {
		var b bytes.Buffer
		for i := range wants {
			if i == 0 {
				pkt(&b, "want "+sha+" multi_ack_detailed side-band-64k ofs-delta\n")
			} else {
				pkt(&b, "want "+sha+"\n")
			}
		}
		for range shallows {
			pkt(&b, "shallow "+sha+"\n")
		}
		b.WriteString("0000")
		for i := range haves {
			pkt(&b, fmt.Sprintf("have %040x\n", i))
		}
		pkt(&b, "done\n")
		return b.Bytes()
	}
	gz := func(p []byte) []byte {
		var b bytes.Buffer
		w, _ := gzip.NewWriterLevel(&b, gzip.BestCompression)
		w.Write(p)
		w.Close()
		return b.Bytes()
	}
	post := func(body []byte, gzipped bool) (int, string) {
		t.Helper()
		req, _ := http.NewRequest("POST", r.url+"/prod/a.git/git-upload-pack", bytes.NewReader(body))
		req.Header.Set("Content-Type", "application/x-git-upload-pack-request")
		if gzipped {
			req.Header.Set("Content-Encoding", "gzip")
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}

	// The same have over and over compresses about 1000 to 1: the
	// review's 1 MiB upload of 6.8 million haves.
	var bomb bytes.Buffer
	pkt(&bomb, "want "+sha+" multi_ack_detailed side-band-64k ofs-delta\n")
	bomb.WriteString("0000")
	have := fmt.Sprintf("%04xhave %s\n", len("have "+sha+"\n")+4, sha)
	bomb.WriteString(strings.Repeat(have, 2_000_000))
	pkt(&bomb, "done\n")

	// Lines the caps don't count, past the byte cap once inflated.
	padded := request(1, 0, 0)
	padded = append(padded[:len(padded)-len("0009done\n")], strings.Repeat("0009done\n", 200_000)...)

	for _, tc := range []struct {
		name    string
		body    []byte
		gzipped bool
		mention string
	}{
		{"the review's gzip bomb of haves", gz(bomb.Bytes()), true, "refused"},
		{"a gzip body inflating past the cap", gz(padded), true, "decompressed"},
		{"more haves than the cap", gz(request(1, 0, 20_000)), true, "16384 haves"},
		{"more wants than the cap", request(300, 0, 0), false, "256 wants"},
		{"more shallows than the cap", gz(request(1, 17_000, 0)), true, "16384 shallows"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			status, body := post(tc.body, tc.gzipped)
			if status != http.StatusBadRequest || !strings.Contains(body, tc.mention) {
				t.Errorf("%d %.300q; want 400 mentioning %q", status, body, tc.mention)
			}
		})
	}

	t.Run("a fetch under the caps is answered", func(t *testing.T) {
		status, body := post(gz(request(1, 0, 1000)), true)
		if status != http.StatusOK || !strings.Contains(body, "PACK") {
			t.Errorf("%d %.200q; want 200 and a pack", status, body)
		}
	})
}
