package emulator

import (
	"bytes"
	"cmp"
	"context"
	"crypto/md5"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"maps"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unicode/utf8"

	"cloud.google.com/go/storage"
	"github.com/fsouza/fake-gcs-server/fakestorage"
)

const (
	layoutFile    = "layout.json"
	lockFile      = "lock"
	indexFile     = "object.json"
	tmpPrefix     = ".tmp-"
	layoutVersion = 1
)

// syncAttempts bounds the retries of a sync whose listing went stale before
// it could read a generation's content (a concurrent delete of a generation).
const syncAttempts = 3

// errChanged reports that the bucket changed between listing it and reading
// a generation; the sync starts over.
var errChanged = errors.New("bucket changed during sync")

// disk keeps a data directory in step with the emulator's bucket.
type disk struct {
	dir    string // DIR
	root   string // DIR/BUCKET
	bucket string
	log    *slog.Logger
	lock   *os.File

	// done counts finished mutating requests. A sync that read done == n
	// before listing the bucket covers the first n of them, so a request
	// whose number is already covered doesn't sync again (group commit).
	done atomic.Uint64

	// failing is set while the directory lags behind the bucket, so that
	// a healthy emulator lets requests through without waiting for mu.
	failing atomic.Bool

	mu       sync.Mutex
	synced   uint64 // done as read by the last successful sync
	objects  map[string]*savedObject
	unstored map[string]bool // names that can't be stored, already logged
}

// savedObject is what the directory holds for one object.
type savedObject struct {
	index   []byte           // object.json as written
	content map[int64]string // generation → md5Hash of its content file
}

// objectIndex is the content of object.json.
type objectIndex struct {
	Name        string            `json:"name"`
	Generations []generationIndex `json:"generations"` // ascending
}

type generationIndex struct {
	Generation         int64             `json:"generation"`
	Live               bool              `json:"live"`
	Size               int64             `json:"size"`
	MD5Hash            string            `json:"md5Hash"`
	CRC32C             string            `json:"crc32c,omitempty"`
	ContentType        string            `json:"contentType,omitempty"`
	ContentEncoding    string            `json:"contentEncoding,omitempty"`
	ContentDisposition string            `json:"contentDisposition,omitempty"`
	ContentLanguage    string            `json:"contentLanguage,omitempty"`
	CacheControl       string            `json:"cacheControl,omitempty"`
	StorageClass       string            `json:"storageClass,omitempty"`
	Metadata           map[string]string `json:"metadata,omitempty"`
	ACL                []aclRule         `json:"acl,omitempty"`
	Created            time.Time         `json:"created,omitzero"`
	Updated            time.Time         `json:"updated,omitzero"`
	Deleted            time.Time         `json:"deleted,omitzero"` // when it stopped being live
	CustomTime         time.Time         `json:"customTime,omitzero"`
	RetentionMode      string            `json:"retentionMode,omitempty"`
	RetainUntil        time.Time         `json:"retainUntil,omitzero"`
}

type aclRule struct {
	Entity      string       `json:"entity"`
	EntityID    string       `json:"entityId,omitempty"`
	Role        string       `json:"role"`
	Domain      string       `json:"domain,omitempty"`
	Email       string       `json:"email,omitempty"`
	ProjectTeam *projectTeam `json:"projectTeam,omitempty"`
}

type projectTeam struct {
	ProjectNumber string `json:"projectNumber,omitempty"`
	Team          string `json:"team,omitempty"`
}

// openDisk locks dir, creating it and its layout file if it's new or empty.
func openDisk(dir, bucket string, log *slog.Logger) (*disk, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("create data directory: %w", err)
	}
	lock, err := lockDir(dir)
	if err != nil {
		return nil, err
	}
	d := &disk{
		dir:      dir,
		root:     filepath.Join(dir, bucket),
		bucket:   bucket,
		log:      log,
		lock:     lock,
		objects:  make(map[string]*savedObject),
		unstored: make(map[string]bool),
	}
	if err := d.checkLayout(); err != nil {
		lock.Close()
		return nil, err
	}
	if err := os.MkdirAll(d.root, 0o755); err != nil {
		lock.Close()
		return nil, fmt.Errorf("create data directory: %w", err)
	}
	return d, nil
}

// checkLayout refuses a directory that isn't ours, or is in a layout this
// version can't read, and marks a new one as ours.
func (d *disk) checkLayout() error {
	path := filepath.Join(d.dir, layoutFile)
	data, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		entries, err := os.ReadDir(d.dir)
		if err != nil {
			return fmt.Errorf("read data directory: %w", err)
		}
		for _, e := range entries {
			if e.Name() != lockFile {
				return fmt.Errorf("%s holds files but no %s: not an emulator data directory", d.dir, layoutFile)
			}
		}
		if err := writeFile(path, fmt.Appendf(nil, "{\"layout\":%d}\n", layoutVersion)); err != nil {
			return err
		}
		return syncDir(d.dir)
	}
	if err != nil {
		return fmt.Errorf("read %s: %w", path, err)
	}
	var layout struct {
		Layout int `json:"layout"`
	}
	if err := json.Unmarshal(data, &layout); err != nil {
		return fmt.Errorf("read %s: %w", path, err)
	}
	if layout.Layout != layoutVersion {
		return fmt.Errorf("%s: layout %d, this emulator reads layout %d", path, layout.Layout, layoutVersion)
	}
	return nil
}

func (d *disk) close() error {
	if err := d.lock.Close(); err != nil {
		return fmt.Errorf("unlock data directory: %w", err)
	}
	return nil
}

// objectDir is the directory of an object: its name can contain anything,
// its hash can't leave the bucket's directory.
func (d *disk) objectDir(name string) string {
	sum := sha256.Sum256([]byte(name))
	return filepath.Join(d.root, hex.EncodeToString(sum[:]))
}

func isObjectDirName(s string) bool {
	if len(s) != 2*sha256.Size {
		return false
	}
	_, err := hex.DecodeString(s)
	return err == nil && strings.ToLower(s) == s
}

// restore loads every object of the directory into gcs, then checks that
// the bucket reads back as the directory holds it.
func (d *disk) restore(ctx context.Context, gcs *fakestorage.Server) error {
	entries, err := os.ReadDir(d.root)
	if err != nil {
		return fmt.Errorf("read data directory: %w", err)
	}
	generations := 0
	for _, e := range entries {
		if err := ctx.Err(); err != nil {
			return err
		}
		path := filepath.Join(d.root, e.Name())
		if !e.IsDir() || !isObjectDirName(e.Name()) {
			d.log.Warn("ignoring unexpected entry in emulator data directory", "path", path)
			continue
		}
		idx, contents, err := d.readObject(path)
		if err != nil {
			return err
		}
		if idx == nil {
			continue
		}
		if err := d.restoreObject(gcs, idx, contents); err != nil {
			return fmt.Errorf("restore %s: %w", filepath.Join(path, indexFile), err)
		}
		generations += len(idx.Generations)
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	written, err := d.sync(gcs)
	if err != nil {
		return err
	}
	if written > 0 {
		// The directory was read back faithfully, so the bucket should
		// match it; a difference means fakestorage changed something.
		d.log.Warn("restored bucket differs from its data directory; rewrote the difference", "objects", written)
	}
	d.log.Info("restored bucket from data directory", "dir", d.dir, "objects", len(d.objects), "generations", generations)
	return nil
}

// readObject reads and checks one object directory, and removes files no
// object.json refers to. It returns a nil index for a directory without
// object.json: the leftover of an interrupted first write or removal.
func (d *disk) readObject(dir string) (*objectIndex, map[int64][]byte, error) {
	indexPath := filepath.Join(dir, indexFile)
	data, err := os.ReadFile(indexPath)
	if errors.Is(err, fs.ErrNotExist) {
		d.log.Warn("removing incomplete object directory (interrupted write or removal)", "path", dir)
		if err := os.RemoveAll(dir); err != nil {
			return nil, nil, fmt.Errorf("remove incomplete object directory: %w", err)
		}
		return nil, nil, nil
	}
	if err != nil {
		return nil, nil, fmt.Errorf("read %s: %w", indexPath, err)
	}
	var idx objectIndex
	if err := json.Unmarshal(data, &idx); err != nil {
		return nil, nil, fmt.Errorf("read %s: %w", indexPath, err)
	}
	if err := d.checkIndex(dir, &idx); err != nil {
		return nil, nil, fmt.Errorf("read %s: %w", indexPath, err)
	}

	contents := make(map[int64][]byte, len(idx.Generations))
	saved := &savedObject{content: make(map[int64]string, len(idx.Generations))}
	for _, g := range idx.Generations {
		path := filepath.Join(dir, strconv.FormatInt(g.Generation, 10))
		content, err := os.ReadFile(path)
		if err != nil {
			return nil, nil, fmt.Errorf("read %s: %w", path, err)
		}
		if int64(len(content)) != g.Size {
			return nil, nil, fmt.Errorf("read %s: %d bytes, %s says %d", path, len(content), indexFile, g.Size)
		}
		if sum := md5Hash(content); sum != g.MD5Hash {
			return nil, nil, fmt.Errorf("read %s: md5 %s, %s says %s", path, sum, indexFile, g.MD5Hash)
		}
		contents[g.Generation] = content
		saved.content[g.Generation] = g.MD5Hash
	}

	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, nil, fmt.Errorf("read %s: %w", dir, err)
	}
	for _, e := range entries {
		if e.Name() == indexFile {
			continue
		}
		if gen, err := strconv.ParseInt(e.Name(), 10, 64); err == nil {
			if _, ok := contents[gen]; ok && e.Name() == strconv.FormatInt(gen, 10) {
				continue
			}
		}
		path := filepath.Join(dir, e.Name())
		d.log.Warn("removing file no object.json refers to (interrupted write)", "path", path)
		if err := os.RemoveAll(path); err != nil {
			return nil, nil, fmt.Errorf("remove leftover: %w", err)
		}
	}

	// Canonical bytes, so that the check after restoring compares like with
	// like whatever formatting the file had.
	if saved.index, err = marshalIndex(&idx); err != nil {
		return nil, nil, err
	}
	d.objects[idx.Name] = saved
	return &idx, contents, nil
}

func (d *disk) checkIndex(dir string, idx *objectIndex) error {
	if idx.Name == "" {
		return errors.New("no object name")
	}
	if want := d.objectDir(idx.Name); filepath.Base(want) != filepath.Base(dir) {
		return fmt.Errorf("object %q belongs in %s", idx.Name, want)
	}
	if len(idx.Generations) == 0 {
		return errors.New("no generations")
	}
	live := 0
	for i, g := range idx.Generations {
		if g.Generation <= 0 {
			return fmt.Errorf("generation %d: not a generation number", g.Generation)
		}
		if i > 0 && g.Generation <= idx.Generations[i-1].Generation {
			return fmt.Errorf("generation %d: generations out of order", g.Generation)
		}
		if g.Live {
			live++
		}
	}
	if live > 1 {
		return fmt.Errorf("%d live generations", live)
	}
	return nil
}

// restoreObject rebuilds an object's history in gcs. fakestorage archives
// the live generation when a new one is created and stamps it deleted now,
// so the noncurrent generations go in first, in ascending order, the live
// one last, and then each noncurrent generation is written again under its
// own number, which replaces it in place with its recorded deletion time.
func (d *disk) restoreObject(gcs *fakestorage.Server, idx *objectIndex, contents map[int64][]byte) error {
	var live *generationIndex
	var noncurrent []*generationIndex
	for i := range idx.Generations {
		if g := &idx.Generations[i]; g.Live {
			live = g
		} else {
			noncurrent = append(noncurrent, g)
		}
	}
	put := func(g *generationIndex) error {
		obj := d.object(idx.Name, g, contents[g.Generation])
		if err := gcs.CreateObjectStreaming(obj.StreamingObject()); err != nil {
			return fmt.Errorf("generation %d: %w", g.Generation, err)
		}
		return nil
	}
	for _, g := range noncurrent {
		if err := put(g); err != nil {
			return err
		}
	}
	if live != nil {
		if err := put(live); err != nil {
			return err
		}
	} else if err := gcs.Backend().DeleteObject(d.bucket, idx.Name); err != nil {
		return fmt.Errorf("delete live generation: %w", err)
	}
	for _, g := range noncurrent {
		if err := put(g); err != nil {
			return err
		}
	}
	return nil
}

func (d *disk) object(name string, g *generationIndex, content []byte) fakestorage.Object {
	var retention *storage.ObjectRetention
	if g.RetentionMode != "" || !g.RetainUntil.IsZero() {
		retention = &storage.ObjectRetention{Mode: g.RetentionMode, RetainUntil: g.RetainUntil}
	}
	var acl []storage.ACLRule
	for _, r := range g.ACL {
		rule := storage.ACLRule{
			Entity:   storage.ACLEntity(r.Entity),
			EntityID: r.EntityID,
			Role:     storage.ACLRole(r.Role),
			Domain:   r.Domain,
			Email:    r.Email,
		}
		if r.ProjectTeam != nil {
			rule.ProjectTeam = &storage.ProjectTeam{ProjectNumber: r.ProjectTeam.ProjectNumber, Team: r.ProjectTeam.Team}
		}
		acl = append(acl, rule)
	}
	return fakestorage.Object{
		ObjectAttrs: fakestorage.ObjectAttrs{
			BucketName:         d.bucket,
			Name:               name,
			StorageClass:       g.StorageClass,
			ContentType:        g.ContentType,
			ContentEncoding:    g.ContentEncoding,
			ContentDisposition: g.ContentDisposition,
			ContentLanguage:    g.ContentLanguage,
			CacheControl:       g.CacheControl,
			ACL:                acl,
			Created:            g.Created,
			Updated:            g.Updated,
			Deleted:            g.Deleted,
			CustomTime:         g.CustomTime,
			Generation:         g.Generation,
			// fakestorage patches metadata maps in place; it gets its own.
			Metadata:  maps.Clone(g.Metadata),
			Retention: retention,
		},
		Content: content,
	}
}

// indexOf describes an object's generations as fakestorage lists them.
func indexOf(name string, attrs []fakestorage.ObjectAttrs) *objectIndex {
	idx := &objectIndex{Name: name, Generations: make([]generationIndex, 0, len(attrs))}
	for _, a := range attrs {
		g := generationIndex{
			Generation: a.Generation,
			// The memory backend stamps Deleted on a generation when it
			// archives it, and only then.
			Live:               a.Deleted.IsZero(),
			Size:               a.Size,
			MD5Hash:            a.Md5Hash,
			CRC32C:             a.Crc32c,
			ContentType:        a.ContentType,
			ContentEncoding:    a.ContentEncoding,
			ContentDisposition: a.ContentDisposition,
			ContentLanguage:    a.ContentLanguage,
			CacheControl:       a.CacheControl,
			StorageClass:       a.StorageClass,
			Metadata:           maps.Clone(a.Metadata),
			Created:            utc(a.Created),
			Updated:            utc(a.Updated),
			Deleted:            utc(a.Deleted),
			CustomTime:         utc(a.CustomTime),
		}
		if r := a.Retention; r != nil {
			g.RetentionMode = r.Mode
			g.RetainUntil = utc(r.RetainUntil)
		}
		for _, r := range a.ACL {
			rule := aclRule{
				Entity:   string(r.Entity),
				EntityID: r.EntityID,
				Role:     string(r.Role),
				Domain:   r.Domain,
				Email:    r.Email,
			}
			if r.ProjectTeam != nil {
				rule.ProjectTeam = &projectTeam{ProjectNumber: r.ProjectTeam.ProjectNumber, Team: r.ProjectTeam.Team}
			}
			g.ACL = append(g.ACL, rule)
		}
		idx.Generations = append(idx.Generations, g)
	}
	slices.SortFunc(idx.Generations, func(a, b generationIndex) int { return cmp.Compare(a.Generation, b.Generation) })
	return idx
}

func utc(t time.Time) time.Time {
	if t.IsZero() {
		return time.Time{}
	}
	return t.UTC()
}

func marshalIndex(idx *objectIndex) ([]byte, error) {
	data, err := json.MarshalIndent(idx, "", "  ")
	if err != nil {
		return nil, fmt.Errorf("encode %s of %q: %w", indexFile, idx.Name, err)
	}
	return append(data, '\n'), nil
}

// ready reports whether mutating requests may proceed: after a failed sync,
// only once a new sync succeeds.
func (d *disk) ready(gcs *fakestorage.Server) error {
	if !d.failing.Load() {
		return nil
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if !d.failing.Load() {
		return nil
	}
	if err := d.syncLocked(gcs); err != nil {
		return err
	}
	d.log.Info("emulator data directory writable again", "dir", d.dir)
	return nil
}

// commit records that a mutating request finished and returns once its
// effect is on disk.
func (d *disk) commit(gcs *fakestorage.Server) error {
	n := d.done.Add(1)
	d.mu.Lock()
	defer d.mu.Unlock()
	if !d.failing.Load() && d.synced >= n {
		return nil
	}
	return d.syncLocked(gcs)
}

// flush writes whatever isn't on disk yet.
func (d *disk) flush(gcs *fakestorage.Server) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.syncLocked(gcs)
}

// syncLocked syncs and records the outcome. d.mu must be held.
func (d *disk) syncLocked(gcs *fakestorage.Server) error {
	covered := d.done.Load()
	if _, err := d.sync(gcs); err != nil {
		d.failing.Store(true)
		d.log.Error("emulator can't save the bucket to its data directory; mutating requests fail until it can", "dir", d.dir, "err", err)
		return err
	}
	d.failing.Store(false)
	d.synced = covered
	return nil
}

// sync writes the difference between the bucket and the directory and
// returns the number of objects it wrote or removed. d.mu must be held.
func (d *disk) sync(gcs *fakestorage.Server) (int, error) {
	for attempt := 1; ; attempt++ {
		n, err := d.syncOnce(gcs)
		if errors.Is(err, errChanged) && attempt < syncAttempts {
			continue
		}
		if err != nil {
			return n, fmt.Errorf("save bucket %s to %s: %w", d.bucket, d.dir, err)
		}
		return n, nil
	}
}

func (d *disk) syncOnce(gcs *fakestorage.Server) (int, error) {
	list, err := gcs.ListObjectsWithOptionsPaginated(d.bucket, fakestorage.ListOptions{Versions: true})
	if err != nil {
		return 0, fmt.Errorf("list objects: %w", err)
	}
	byName := make(map[string][]fakestorage.ObjectAttrs)
	for _, a := range list.Objects {
		byName[a.Name] = append(byName[a.Name], a)
	}
	written := 0
	for _, name := range slices.Sorted(maps.Keys(byName)) {
		if !utf8.ValidString(name) {
			// JSON can't hold it, and GCS itself refuses such names.
			if !d.unstored[name] {
				d.unstored[name] = true
				d.log.Error("emulator can't save an object whose name isn't UTF-8; it won't survive a restart", "object", name)
			}
			continue
		}
		idx := indexOf(name, byName[name])
		data, err := marshalIndex(idx)
		if err != nil {
			return written, err
		}
		saved := d.objects[name]
		if saved != nil && bytes.Equal(saved.index, data) {
			continue
		}
		if err := d.writeObject(gcs, idx, data, saved); err != nil {
			return written, err
		}
		written++
	}
	for _, name := range slices.Sorted(maps.Keys(d.objects)) {
		if _, ok := byName[name]; ok {
			continue
		}
		if err := d.removeObject(name); err != nil {
			return written, err
		}
		written++
	}
	return written, nil
}

// writeObject writes the content files the directory lacks, then
// object.json, then removes the content of generations that are gone.
func (d *disk) writeObject(gcs *fakestorage.Server, idx *objectIndex, data []byte, saved *savedObject) error {
	dir := d.objectDir(idx.Name)
	if saved == nil {
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return fmt.Errorf("create directory of %q: %w", idx.Name, err)
		}
		if err := syncDir(d.root); err != nil {
			return err
		}
	}
	content := make(map[int64]string, len(idx.Generations))
	wroteContent := false
	for _, g := range idx.Generations {
		content[g.Generation] = g.MD5Hash
		if saved != nil && saved.content[g.Generation] == g.MD5Hash {
			continue
		}
		obj, err := gcs.GetObjectWithGeneration(d.bucket, idx.Name, g.Generation)
		if err != nil {
			return fmt.Errorf("%w: read %q generation %d: %v", errChanged, idx.Name, g.Generation, err)
		}
		if md5Hash(obj.Content) != g.MD5Hash {
			return fmt.Errorf("%w: %q generation %d has new content", errChanged, idx.Name, g.Generation)
		}
		if err := writeFile(filepath.Join(dir, strconv.FormatInt(g.Generation, 10)), obj.Content); err != nil {
			return err
		}
		wroteContent = true
	}
	// object.json must not be on disk before the content it refers to.
	if wroteContent {
		if err := syncDir(dir); err != nil {
			return err
		}
	}
	if err := writeFile(filepath.Join(dir, indexFile), data); err != nil {
		return err
	}
	if err := syncDir(dir); err != nil {
		return err
	}
	if saved != nil {
		for gen := range saved.content {
			if _, ok := content[gen]; ok {
				continue
			}
			// A file left behind is removed at the next start.
			path := filepath.Join(dir, strconv.FormatInt(gen, 10))
			if err := os.Remove(path); err != nil && !errors.Is(err, fs.ErrNotExist) {
				d.log.Warn("can't remove content of a deleted generation", "path", path, "err", err)
			}
		}
	}
	d.objects[idx.Name] = &savedObject{index: data, content: content}
	return nil
}

// removeObject removes an object none of whose generations is left.
// object.json goes first: a directory without it is a leftover.
func (d *disk) removeObject(name string) error {
	dir := d.objectDir(name)
	if err := os.Remove(filepath.Join(dir, indexFile)); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("remove %q: %w", name, err)
	}
	if err := syncDir(dir); err != nil {
		return err
	}
	if err := os.RemoveAll(dir); err != nil {
		d.log.Warn("can't remove directory of a deleted object", "path", dir, "err", err)
	}
	delete(d.objects, name)
	return syncDir(d.root)
}

// writeFile replaces path atomically with data, synced to disk.
func writeFile(path string, data []byte) (err error) {
	f, err := os.CreateTemp(filepath.Dir(path), tmpPrefix+"*")
	if err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	defer func() {
		if err != nil {
			f.Close()
			os.Remove(f.Name())
			err = fmt.Errorf("write %s: %w", path, err)
		}
	}()
	if _, err := f.Write(data); err != nil {
		return err
	}
	if err := f.Sync(); err != nil {
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	return os.Rename(f.Name(), path)
}

// syncDir makes the entries of dir durable (renames, creations, removals).
func syncDir(dir string) error {
	if runtime.GOOS == "windows" {
		return nil // directories can't be synced there; NTFS journals them
	}
	f, err := os.Open(dir)
	if err != nil {
		return fmt.Errorf("sync %s: %w", dir, err)
	}
	defer f.Close()
	if err := f.Sync(); err != nil {
		return fmt.Errorf("sync %s: %w", dir, err)
	}
	return nil
}

// md5Hash is the object's md5Hash as GCS and fakestorage encode it.
func md5Hash(content []byte) string {
	sum := md5.Sum(content)
	return base64.StdEncoding.EncodeToString(sum[:])
}
