package main

import (
	"archive/tar"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"

	"github.com/klauspost/compress/gzip"

	"github.com/linkgate/linkgate/internal/eventually"
	"github.com/linkgate/linkgate/internal/syncbuf"
	"github.com/linkgate/linkgate/internal/testdep"
)

// make image, tested for real: the images are built from make cross's
// binaries, the amd64 one runs `linkgate serve` in podman (or, where no
// container can run, in a chroot of its unpacked rootfs) with its data on a
// volume that survives a restart, the arm64 one's config is inspected and
// its binary run under qemu-user, and the Dockerfile's final stage, built
// by podman, gives the same configuration and files.
func TestImage(t *testing.T) {
	if testing.Short() || testdep.Race {
		t.Skip("builds and compresses both images: not under -race (scripts/test-isolated.sh runs it without)")
	}
	bins := filepath.Dir(testdep.Binary(t, testdep.Arm64Binary, "linkgate_linux_arm64")) // make cross's output
	ctx := context.Background()
	s, err := readStamp(ctx, repoRoot, "v0.0.0-test", "")
	if err != nil {
		t.Fatal(err)
	}
	out, err := os.MkdirTemp("", "linkgate-image-") // lower case: podman takes the layout's path for a name
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(out) })
	start := time.Now()
	images, err := writeImages(ctx, repoRoot, bins, out, s)
	if err != nil {
		t.Fatal(err)
	}
	var report strings.Builder
	fmt.Fprintf(&report, "make image (%s, %.1f s):\n", s.Version, time.Since(start).Seconds())
	for _, im := range images {
		fmt.Fprintf(&report, "  linux/%s: %.1f MB compressed (goal 20 MB), %.1f MB unpacked\n", im.arch, float64(im.compressed)/1e6, float64(im.uncompressed)/1e6)
	}
	t.Log(report.String())

	t.Run("layout", func(t *testing.T) { checkLayout(t, filepath.Join(out, "oci"), s) })
	t.Run("reproducible", func(t *testing.T) {
		mods, err := linkedModules(ctx, repoRoot)
		if err != nil {
			t.Fatal(err)
		}
		base, err := baseEntries(repoRoot, mods)
		if err != nil {
			t.Fatal(err)
		}
		again, err := buildImage("amd64", filepath.Join(bins, binaryName("linkgate", "amd64")), base, s)
		if err != nil {
			t.Fatal(err)
		}
		d1, err1 := images[0].image.Digest()
		d2, err2 := again.image.Digest()
		if err1 != nil || err2 != nil || d1 != d2 {
			t.Errorf("two builds of the amd64 image: %v (%v), %v (%v)", d1, err1, d2, err2)
		}
	})
	t.Run("config", func(t *testing.T) {
		for _, im := range images {
			checkImageConfig(t, im.image, im.arch, s)
		}
	})
	t.Run("arm64 under qemu", func(t *testing.T) {
		qemu := testdep.Binary(t, testdep.QEMUArm64, "qemu-aarch64-static")
		bin := extractFile(t, images[slices.IndexFunc(images, func(b builtImage) bool { return b.arch == "arm64" })].image, "linkgate")
		path := filepath.Join(t.TempDir(), "linkgate")
		if err := os.WriteFile(path, bin, 0o755); err != nil {
			t.Fatal(err)
		}
		got, err := exec.Command(qemu, path, "version").CombinedOutput()
		if err != nil || !strings.Contains(string(got), "linux/arm64") {
			t.Errorf("arm64 image's linkgate version under qemu: %q, %v", got, err)
		}
	})
	amd64 := images[slices.IndexFunc(images, func(b builtImage) bool { return b.arch == "amd64" })]
	ran := "podman"
	t.Run("serve", func(t *testing.T) {
		podman := podmanWorks(t, filepath.Join(out, imageTarName(s.Version, "amd64")))
		if os.Getenv("LINKGATE_TEST_IMAGE_CHROOT") == "1" { // to try the fallback by hand
			podman.err = errors.New("LINKGATE_TEST_IMAGE_CHROOT=1")
		}
		var r runner
		if podman.err != nil {
			ran = "chroot (podman could not run a container: " + podman.err.Error() + ")"
			t.Logf("falling back to a chroot of the unpacked rootfs: %v", podman.err)
			r = newChrootRunner(t, amd64.image)
		} else {
			r = podman
			// A real consumer of the OCI layout: podman picks this
			// machine's image from the multi-arch index.
			// (The image it pulls is the one loaded, removed at cleanup.)
			pulled := podman.cmd(t, "pull", "--quiet", "oci:"+filepath.Join(out, "oci")+":"+s.Version)
			if pulled != podman.image {
				t.Errorf("podman pull from the OCI layout gave image %s, want the amd64 image %s", pulled, podman.image)
			}
		}
		checkServe(t, r)
	})
	t.Run("Dockerfile", func(t *testing.T) {
		if !strings.HasPrefix(ran, "podman") {
			t.Skip("podman cannot run containers here; the Dockerfile is not built")
		}
		checkDockerfile(t, out, amd64.image, s)
	})
	fmt.Fprintf(&report, "serve ran in: %s\n", ran)
	if dir := os.Getenv("LINKGATE_TEST_ARTIFACTS"); dir != "" {
		os.WriteFile(filepath.Join(dir, "image.txt"), []byte(report.String()), 0o644)
	}
	t.Log("serve ran in: " + ran)
}

// checkLayout opens the OCI layout and checks it holds the multi-arch index.
func checkLayout(t *testing.T, dir string, s stamp) {
	p, err := layout.FromPath(dir)
	if err != nil {
		t.Fatal(err)
	}
	top, err := p.ImageIndex()
	if err != nil {
		t.Fatal(err)
	}
	im, err := top.IndexManifest()
	if err != nil {
		t.Fatal(err)
	}
	if len(im.Manifests) != 1 || im.Manifests[0].Annotations["org.opencontainers.image.ref.name"] != s.Version {
		t.Fatalf("index.json: %+v; want one index tagged %s", im.Manifests, s.Version)
	}
	idx, err := top.ImageIndex(im.Manifests[0].Digest)
	if err != nil {
		t.Fatal(err)
	}
	multi, err := idx.IndexManifest()
	if err != nil {
		t.Fatal(err)
	}
	var platforms []string
	for _, m := range multi.Manifests {
		platforms = append(platforms, m.Platform.String())
		if _, err := idx.Image(m.Digest); err != nil {
			t.Errorf("%s: %v", m.Platform, err)
		}
	}
	if want := []string{"linux/amd64", "linux/arm64/v8"}; !slices.Equal(platforms, want) {
		t.Errorf("multi-arch index platforms %v, want %v", platforms, want)
	}
}

// checkImageConfig checks what the issue asks of the image's config.
func checkImageConfig(t *testing.T, img v1.Image, arch string, s stamp) {
	t.Helper()
	cf, err := img.ConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	c := cf.Config
	switch {
	case cf.OS != "linux" || cf.Architecture != arch:
		t.Errorf("%s image is %s/%s", arch, cf.OS, cf.Architecture)
	case !slices.Equal(c.Entrypoint, []string{"/linkgate"}) || !slices.Equal(c.Cmd, []string{"serve"}):
		t.Errorf("%s: entrypoint %q cmd %q", arch, c.Entrypoint, c.Cmd)
	case c.User != "65532:65532":
		t.Errorf("%s: user %q, want the non-root 65532", arch, c.User)
	case c.Labels["org.opencontainers.image.revision"] != s.Commit || c.Labels["org.opencontainers.image.version"] != s.Version ||
		c.Labels["org.opencontainers.image.licenses"] != "Apache-2.0" || c.Labels["org.opencontainers.image.source"] == "":
		t.Errorf("%s: labels %v", arch, c.Labels)
	case len(c.ExposedPorts) == 0:
		t.Errorf("%s: no exposed port", arch)
	case !cf.Created.Equal(s.Time):
		t.Errorf("%s: created %v, want the commit's time %v", arch, cf.Created, s.Time)
	}
	files := imageFiles(t, img)
	for name, want := range map[string]string{
		"linkgate":                          "-rwxr-xr-x 0",
		"etc/passwd":                        "-rw-r--r-- 0",
		"etc/ssl/certs/ca-certificates.crt": "-rw-r--r-- 0",
		"data":                              "drwxr-xr-x 65532",
		"tmp":                               "dtrwxrwxrwx 0",
		"usr/share/doc/linkgate/LICENSE":    "-rw-r--r-- 0",
		"usr/share/doc/linkgate/NOTICE":     "-rw-r--r-- 0",
		"usr/share/doc/linkgate/licenses/go/LICENSE": "-rw-r--r-- 0",
	} {
		if got := files[name]; got != want {
			t.Errorf("%s image: %s is %q, want %q", arch, name, got, want)
		}
	}
	if passwd := string(extractFile(t, img, "etc/passwd")); !strings.Contains(passwd, "linkgate:x:65532:65532:") {
		t.Errorf("%s: /etc/passwd has no linkgate user:\n%s", arch, passwd)
	}
}

// imageFiles lists the image's flattened files as "mode uid" by name.
func imageFiles(t *testing.T, img v1.Image) map[string]string {
	t.Helper()
	rc := mutate.Extract(img)
	defer rc.Close()
	files := map[string]string{}
	tr := tar.NewReader(rc)
	for {
		hdr, err := tr.Next()
		if err == io.EOF {
			return files
		}
		if err != nil {
			t.Fatal(err)
		}
		files[strings.TrimPrefix(hdr.Name, "/")] = fmt.Sprintf("%s %d", hdr.FileInfo().Mode(), hdr.Uid)
	}
}

// extractFile returns the content of a file of the image.
func extractFile(t *testing.T, img v1.Image, name string) []byte {
	t.Helper()
	rc := mutate.Extract(img)
	defer rc.Close()
	tr := tar.NewReader(rc)
	for {
		hdr, err := tr.Next()
		if err != nil {
			t.Fatalf("%s not in the image: %v", name, err)
		}
		if strings.TrimPrefix(hdr.Name, "/") == name {
			data, err := io.ReadAll(tr)
			if err != nil {
				t.Fatal(err)
			}
			return data
		}
	}
}

// runner runs linkgate serve from the image with its data kept across
// restarts, listening on 127.0.0.1:port.
type runner interface {
	start(t *testing.T, port int)
	restart(t *testing.T) // a clean stop (SIGTERM), then a start on the same data
	logs() string
	dataOwner(t *testing.T) int // the uid owning the files the server wrote
}

// checkServe runs the server and checks health, a create, a redirect, and
// that the link survives a restart.
func checkServe(t *testing.T, r runner) {
	port := freePort(t)
	base := fmt.Sprintf("http://127.0.0.1:%d", port)
	r.start(t, port)
	waitHealthy(t, base, r)
	resp, err := http.Post(base+"/shortenURL", "application/json", strings.NewReader(`{"OriginalURL":"https://aws.amazon.com/ec2/graviton/"}`))
	if err != nil {
		t.Fatal(err)
	}
	var created struct{ ShortURL string }
	err = json.NewDecoder(resp.Body).Decode(&created)
	resp.Body.Close()
	if err != nil || resp.StatusCode != http.StatusCreated || created.ShortURL == "" {
		t.Fatalf("create in the container: %d %+v %v\n%s", resp.StatusCode, created, err, r.logs())
	}
	checkRedirect(t, base+"/"+created.ShortURL, r)
	r.restart(t)
	waitHealthy(t, base, r)
	checkRedirect(t, base+"/"+created.ShortURL, r)
	if !strings.Contains(r.logs(), "msg=stopped") {
		t.Errorf("no clean stop in the logs:\n%s", r.logs())
	}
	if uid := r.dataOwner(t); uid != imageUID {
		t.Errorf("the data files are owned by uid %d, want the image's user %d", uid, imageUID)
	}
}

func checkRedirect(t *testing.T, url string, r runner) {
	t.Helper()
	client := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }, Timeout: 10 * time.Second}
	resp, err := client.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusFound || resp.Header.Get("Location") != "https://aws.amazon.com/ec2/graviton/" {
		t.Fatalf("GET %s: %d %q\n%s", url, resp.StatusCode, resp.Header.Get("Location"), r.logs())
	}
}

// waitHealthy polls /healthz until it answers 200 (bounded).
func waitHealthy(t *testing.T, base string, r runner) {
	t.Helper()
	client := &http.Client{Timeout: time.Second}
	if !eventually.Within(60*time.Second, func() bool {
		resp, err := client.Get(base + "/healthz")
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK
	}) {
		t.Fatalf("%s/healthz did not answer 200 within 60 s:\n%s", base, r.logs())
	}
}

func freePort(t *testing.T) int {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port
}

// podmanRunner runs the image in rootful podman: runc (crun's setrlimit
// fails in this sandbox), explicit ulimits, the host network (the test's
// loopback-only namespace), a named volume on /data.
type podmanRunner struct {
	podman, image, name, volume string
	err                         error // why podman cannot run containers here, if it cannot
}

var podmanRunFlags = []string{"--runtime", "runc", "--ulimit", "nofile=16384:16384", "--ulimit", "nproc=4096:4096", "--network", "host"}

func (p *podmanRunner) cmd(t *testing.T, args ...string) string {
	t.Helper()
	out, err := exec.Command(p.podman, args...).CombinedOutput()
	if err != nil {
		t.Fatalf("podman %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return strings.TrimSpace(string(out))
}

// podmanWorks loads the docker-save archive into podman and runs
// `linkgate version` in it. Podman missing fails the test in CI; podman
// unable to run any container is returned as p.err, for the fallback.
func podmanWorks(t *testing.T, archive string) *podmanRunner {
	t.Helper()
	p := &podmanRunner{podman: testdep.Binary(t, "LINKGATE_TEST_PODMAN", "podman")}
	id := fmt.Sprintf("linkgate-test-%d-%d", os.Getpid(), time.Now().UnixNano())
	p.name, p.volume = id, id
	loaded := p.cmd(t, "load", "--quiet", "--input", archive)
	img, err := tarball.ImageFromPath(archive, nil)
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := img.ConfigName()
	if err != nil {
		t.Fatal(err)
	}
	p.image = cfg.Hex // podman's image id is the config digest: immune to another run retagging
	t.Logf("podman load: %s (image %s)", loaded, p.image[:12])
	t.Cleanup(func() { exec.Command(p.podman, "rmi", "--force", p.image).Run() })
	out, err := exec.Command(p.podman, append(append([]string{"run", "--rm"}, podmanRunFlags...), p.image, "version")...).CombinedOutput()
	if err != nil {
		p.err = fmt.Errorf("podman run: %v: %s", err, bytes.TrimSpace(out))
	} else if !strings.Contains(string(out), "linux/amd64") {
		t.Fatalf("linkgate version in podman: %q", out)
	}
	return p
}

func (p *podmanRunner) start(t *testing.T, port int) {
	t.Cleanup(func() {
		exec.Command(p.podman, "rm", "--force", "--time", "5", p.name).Run()
		exec.Command(p.podman, "volume", "rm", "--force", p.volume).Run()
	})
	args := append([]string{"run", "--detach", "--name", p.name, "--volume", p.volume + ":/data"}, podmanRunFlags...)
	p.cmd(t, append(args, p.image, "serve", "--addr", fmt.Sprintf("127.0.0.1:%d", port))...)
}

func (p *podmanRunner) restart(t *testing.T) { p.cmd(t, "restart", "--time", "20", p.name) }

func (p *podmanRunner) logs() string {
	out, _ := exec.Command(p.podman, "logs", p.name).CombinedOutput()
	return string(out)
}

func (p *podmanRunner) dataOwner(t *testing.T) int {
	return ownerOfFiles(t, p.cmd(t, "volume", "inspect", "--format", "{{.Mountpoint}}", p.volume))
}

// ownerOfFiles returns the uid owning the files in dir, failing the test
// when there are none or their owners differ.
func ownerOfFiles(t *testing.T, dir string) int {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil || len(entries) == 0 {
		t.Fatalf("no data files in %s: %v", dir, err)
	}
	uid := -1
	for _, e := range entries {
		fi, err := os.Stat(filepath.Join(dir, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		u := int(fi.Sys().(*syscall.Stat_t).Uid)
		if uid != -1 && u != uid {
			t.Fatalf("data files in %s are owned by %d and %d", dir, uid, u)
		}
		uid = u
	}
	return uid
}

// chrootRunner runs the image's unpacked rootfs under chroot as the
// image's user: the fallback where no container can run.
type chrootRunner struct {
	dir  string
	args []string
	cmd  *exec.Cmd
	out  syncbuf.Buffer
}

func newChrootRunner(t *testing.T, img v1.Image) *chrootRunner {
	dir := t.TempDir()
	rc := mutate.Extract(img)
	defer rc.Close()
	tr := tar.NewReader(rc)
	for {
		hdr, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		p := filepath.Join(dir, filepath.FromSlash(strings.TrimPrefix(hdr.Name, "/")))
		switch hdr.Typeflag {
		case tar.TypeDir:
			if err := os.MkdirAll(p, 0o755); err != nil {
				t.Fatal(err)
			}
		case tar.TypeReg:
			data, err := io.ReadAll(tr)
			if err != nil {
				t.Fatal(err)
			}
			if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(p, data, 0o644); err != nil {
				t.Fatal(err)
			}
		}
		if err := os.Chmod(p, hdr.FileInfo().Mode()); err != nil {
			t.Fatal(err)
		}
		if err := os.Lchown(p, hdr.Uid, hdr.Gid); err != nil {
			t.Fatal(err)
		}
	}
	os.Chmod(dir, 0o755)
	return &chrootRunner{dir: dir}
}

func (c *chrootRunner) start(t *testing.T, port int) {
	c.args = []string{"/linkgate", "serve", "--addr", fmt.Sprintf("127.0.0.1:%d", port)}
	c.run(t)
}

func (c *chrootRunner) run(t *testing.T) {
	c.cmd = exec.Command(c.args[0], c.args[1:]...)
	c.cmd.Dir = "/"
	c.cmd.Env = []string{"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"}
	c.cmd.SysProcAttr = &syscall.SysProcAttr{Chroot: c.dir, Credential: &syscall.Credential{Uid: imageUID, Gid: imageUID}}
	c.cmd.Stdout, c.cmd.Stderr = &c.out, &c.out
	if err := c.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	cmd := c.cmd
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
}

func (c *chrootRunner) restart(t *testing.T) {
	c.cmd.Process.Signal(syscall.SIGTERM)
	if err := c.cmd.Wait(); err != nil {
		t.Fatalf("linkgate in the chroot did not stop cleanly: %v\n%s", err, c.out.String())
	}
	c.run(t)
}

func (c *chrootRunner) logs() string { return c.out.String() }

func (c *chrootRunner) dataOwner(t *testing.T) int {
	return ownerOfFiles(t, filepath.Join(c.dir, "data"))
}

// checkDockerfile builds the Dockerfile's final stage with podman, its
// build stage stood in for by an image holding the rootfs that stage
// writes (no Go image can be pulled here), and checks the result has the
// configuration and the files (modes, owners) of the image make image
// builds.
func checkDockerfile(t *testing.T, out string, want v1.Image, s stamp) {
	p := &podmanRunner{podman: testdep.Binary(t, "LINKGATE_TEST_PODMAN", "podman")}
	id := fmt.Sprintf("%d-%d", os.Getpid(), time.Now().UnixNano())
	// What the build stage's last step writes: tools/release rootfs.
	bin := filepath.Join(t.TempDir(), "linkgate")
	if err := os.WriteFile(bin, extractFile(t, want, "linkgate"), 0o755); err != nil {
		t.Fatal(err)
	}
	rootfs := filepath.Join(t.TempDir(), "rootfs")
	if err := writeRootfs(context.Background(), repoRoot, bin, rootfs); err != nil {
		t.Fatal(err)
	}
	layer, _, err := imageLayer(prefixed("rootfs", dirEntries(t, rootfs)), s, gzip.BestSpeed)
	if err != nil {
		t.Fatal(err)
	}
	stand, err := mutate.AppendLayers(mutate.ConfigMediaType(mutate.MediaType(empty.Image, types.OCIManifestSchema1), types.OCIConfigJSON), layer)
	if err != nil {
		t.Fatal(err)
	}
	buildTag := "localhost/linkgate-test-build:" + id
	standTar := filepath.Join(t.TempDir(), "build.tar")
	ref, err := name.NewTag(buildTag)
	if err != nil {
		t.Fatal(err)
	}
	if err := tarball.WriteToFile(standTar, ref, stand); err != nil {
		t.Fatal(err)
	}
	p.cmd(t, "load", "--quiet", "--input", standTar)
	t.Cleanup(func() { exec.Command(p.podman, "rmi", "--force", buildTag).Run() })

	dockerfile, err := os.ReadFile(filepath.Join(repoRoot, "Dockerfile"))
	if err != nil {
		t.Fatal(err)
	}
	final := finalStage(t, string(dockerfile))
	ctxDir := t.TempDir()
	if err := os.WriteFile(filepath.Join(ctxDir, "Dockerfile"), []byte("FROM "+buildTag+" AS build\n"+final), 0o644); err != nil {
		t.Fatal(err)
	}
	tag := "localhost/linkgate-test-dockerfile:" + id
	p.cmd(t, "build", "--quiet", "--pull=never", "--layers=false", "--timestamp", fmt.Sprint(s.Time.Unix()),
		"--build-arg", "VERSION="+s.Version, "--build-arg", "REVISION="+s.Commit, "--tag", tag, ctxDir)
	t.Cleanup(func() { exec.Command(p.podman, "rmi", "--force", tag).Run() })
	saved := filepath.Join(t.TempDir(), "dockerfile.tar")
	p.cmd(t, "save", "--format", "docker-archive", "--output", saved, tag)
	got, err := tarball.ImageFromPath(saved, nil)
	if err != nil {
		t.Fatal(err)
	}
	gotCF, err := got.ConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	wantCF, err := want.ConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	g, w := gotCF.Config, wantCF.Config
	for k := range g.Labels {
		if strings.HasPrefix(k, "io.buildah.") {
			delete(g.Labels, k) // buildah's own
		}
	}
	for _, c := range []struct {
		what      string
		got, want any
	}{
		{"User", g.User, w.User}, {"Entrypoint", g.Entrypoint, w.Entrypoint}, {"Cmd", g.Cmd, w.Cmd},
		{"Env", g.Env, w.Env}, {"WorkingDir", g.WorkingDir, w.WorkingDir}, {"ExposedPorts", g.ExposedPorts, w.ExposedPorts},
		{"Volumes", g.Volumes, w.Volumes}, {"Labels", g.Labels, w.Labels},
	} {
		if fmt.Sprint(c.got) != fmt.Sprint(c.want) {
			t.Errorf("Dockerfile image %s = %v, make image's = %v", c.what, c.got, c.want)
		}
	}
	gotFiles, wantFiles := imageFiles(t, got), imageFiles(t, want)
	for name, mode := range wantFiles {
		if gotFiles[name] != mode {
			t.Errorf("Dockerfile image: %s is %q, make image's %q", name, gotFiles[name], mode)
		}
	}
	for name := range gotFiles {
		if _, ok := wantFiles[name]; !ok {
			t.Errorf("Dockerfile image has %s, make image's has not", name)
		}
	}
}

// dirEntries reads the files and folders under dir as entries, with their
// modes and owners.
func dirEntries(t *testing.T, dir string) []entry {
	t.Helper()
	var entries []entry
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || p == dir {
			return err
		}
		fi, err := d.Info()
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		e := entry{Name: filepath.ToSlash(rel), Mode: int64(fi.Mode().Perm()), Dir: d.IsDir(), UID: int(fi.Sys().(*syscall.Stat_t).Uid)}
		if fi.Mode()&fs.ModeSticky != 0 {
			e.Mode |= 0o1000
		}
		if !d.IsDir() {
			if e.Data, err = os.ReadFile(p); err != nil {
				return err
			}
		}
		entries = append(entries, e)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return entries
}

// finalStage returns the Dockerfile from its last FROM line on: the stage
// that makes the image.
func finalStage(t *testing.T, dockerfile string) string {
	t.Helper()
	lines := strings.Split(dockerfile, "\n")
	last := -1
	for i, l := range lines {
		if strings.HasPrefix(strings.ToUpper(strings.TrimSpace(l)), "FROM ") {
			last = i
		}
	}
	if last < 0 || !strings.EqualFold(strings.Fields(lines[last])[1], "scratch") {
		t.Fatalf("Dockerfile: the final stage must be FROM scratch")
	}
	return strings.Join(lines[last:], "\n")
}
