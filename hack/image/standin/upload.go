package main

// Uploads, parsed the way the real runtime's web framework (Starlette, with
// python-multipart) parses them: each file part stays in memory up to 1 MiB
// and is then spooled to a temporary file in the directory Python's
// tempfile.gettempdir() would choose. Without a writable one the request
// fails with the framework's 400, as the real runtime's does.

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"os"
	"path/filepath"
	"strings"
)

const (
	// Starlette's MultiPartParser.spool_max_size: a file part larger than this
	// rolls over from memory to a temporary file.
	spoolThreshold = 1 << 20
	// Starlette's max_part_size for a field that is not a file, and its
	// default max_files and max_fields.
	maxFieldBytes = 1 << 20
	maxFiles      = 1000
	maxFields     = 1000
	// FastAPI's answer when reading the body raised anything it does not know.
	bodyParseError = "There was an error parsing the body"
)

// clientError is a 400 the framework answers with its own detail.
type clientError string

func (e clientError) Error() string { return string(e) }

// tempDirCandidates lists the directories Python's tempfile tries, in order:
// $TMPDIR, $TEMP, $TMP, then /tmp, /var/tmp, /usr/tmp, then the working directory.
func tempDirCandidates() []string {
	var dirs []string
	for _, name := range []string{"TMPDIR", "TEMP", "TMP"} {
		if dir := os.Getenv(name); dir != "" {
			dirs = append(dirs, dir)
		}
	}
	dirs = append(dirs, "/tmp", "/var/tmp", "/usr/tmp")
	if cwd, err := os.Getwd(); err == nil {
		dirs = append(dirs, cwd)
	}
	return dirs
}

// usableTempDir is the first candidate where a file can be created and
// written, probed as tempfile.gettempdir() probes: a file made and removed.
func usableTempDir() (string, error) {
	candidates := tempDirCandidates()
	for _, dir := range candidates {
		probe, err := os.CreateTemp(dir, "standin-probe-")
		if err != nil {
			continue
		}
		_, writeErr := probe.Write([]byte("blat"))
		probe.Close()
		os.Remove(probe.Name())
		if writeErr == nil {
			return dir, nil
		}
	}
	return "", fmt.Errorf("no usable temporary directory found in %v", candidates)
}

// spooledFile is one uploaded file: in memory, or in a temporary file once it
// grew past spoolThreshold. The file keeps its name while the request is
// handled (Python's is unnamed), so a test can see where it landed.
type spooledFile struct {
	filename string
	size     int64
	memory   bytes.Buffer
	disk     *os.File
}

func (f *spooledFile) Write(p []byte) (int, error) {
	if f.disk == nil && f.memory.Len()+len(p) > spoolThreshold {
		dir, err := usableTempDir()
		if err != nil {
			return 0, err
		}
		if f.disk, err = os.CreateTemp(dir, "standin-upload-"); err != nil {
			return 0, err
		}
		if _, err := f.disk.Write(f.memory.Bytes()); err != nil {
			return 0, err
		}
		f.memory.Reset()
	}
	var n int
	var err error
	if f.disk != nil {
		n, err = f.disk.Write(p)
	} else {
		n, err = f.memory.Write(p)
	}
	f.size += int64(n)
	return n, err
}

func (f *spooledFile) spooledTo() string {
	if f.disk == nil {
		return ""
	}
	return filepath.Dir(f.disk.Name())
}

func (f *spooledFile) remove() {
	if f.disk != nil {
		f.disk.Close()
		os.Remove(f.disk.Name())
	}
}

// form is a parsed multipart body.
type form struct {
	fields map[string]string
	files  map[string]*spooledFile
}

func (f *form) remove() {
	for _, file := range f.files {
		file.remove()
	}
}

// readForm parses a multipart/form-data body, spooling files as Starlette
// does. A body of another content type is an empty form, as in Starlette.
func readForm(r *http.Request) (*form, error) {
	parsed := &form{fields: map[string]string{}, files: map[string]*spooledFile{}}
	mediaType, _, _ := mime.ParseMediaType(r.Header.Get("Content-Type"))
	if mediaType != "multipart/form-data" {
		return parsed, nil
	}
	reader, err := r.MultipartReader()
	if err != nil {
		return parsed, err
	}
	for {
		part, err := reader.NextPart()
		if errors.Is(err, io.EOF) {
			return parsed, nil
		}
		if err != nil {
			return parsed, err
		}
		if part.FileName() == "" {
			if len(parsed.fields) == maxFields {
				return parsed, clientError(fmt.Sprintf("Too many fields. Maximum number of fields is %d.", maxFields))
			}
			value, err := io.ReadAll(io.LimitReader(part, maxFieldBytes+1))
			if err != nil {
				return parsed, err
			}
			if len(value) > maxFieldBytes {
				return parsed, clientError("Part exceeded maximum size of 1024KB.")
			}
			parsed.fields[part.FormName()] = string(value)
			continue
		}
		if len(parsed.files) == maxFiles {
			return parsed, clientError(fmt.Sprintf("Too many files. Maximum number of files is %d.", maxFiles))
		}
		file := &spooledFile{filename: part.FileName()}
		parsed.files[part.FormName()] = file
		if _, err := io.Copy(file, part); err != nil {
			return parsed, err
		}
	}
}

// transcribe stands in for POST /v1/audio/transcriptions: it parses the
// upload like the real runtime, then answers with what it received instead
// of calling a provider.
func transcribe(w http.ResponseWriter, r *http.Request) {
	parsed, err := readForm(r)
	defer parsed.remove()
	var framework clientError
	switch {
	case errors.As(err, &framework):
		reply(w, http.StatusBadRequest, map[string]string{"detail": string(framework)})
		return
	case err != nil:
		logf("%s %s: %s: %v", r.Method, r.URL.Path, strings.ToLower(bodyParseError), err)
		reply(w, http.StatusBadRequest, map[string]string{"detail": bodyParseError})
		return
	}
	file, model := parsed.files["file"], parsed.fields["model"]
	if file == nil || model == "" {
		reply(w, http.StatusUnprocessableEntity, map[string]string{
			"detail": "the form fields file and model are required",
		})
		return
	}
	reply(w, http.StatusOK, map[string]any{
		"model": model,
		"file":  map[string]any{"filename": file.filename, "bytes": file.size, "spooledTo": file.spooledTo()},
	})
}
