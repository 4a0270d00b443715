package browsertest

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
)

// Chromium returns the path of the browser: $SWITCHBOARD_CHROMIUM, else the first of Debian's
// and Google's binary names on PATH. Without one it skips t, or fails it when CI=true.
func Chromium(t testing.TB) string {
	t.Helper()
	if p := os.Getenv("SWITCHBOARD_CHROMIUM"); p != "" {
		return p
	}
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome", "google-chrome-stable", "headless-shell"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	const msg = "no chromium binary on PATH (install Debian's chromium package, or set SWITCHBOARD_CHROMIUM)"
	if os.Getenv("CI") == "true" {
		t.Fatal(msg + "; CI=true, so the browser tests must run")
	}
	t.Skip("browser tests skipped: " + msg)
	return ""
}

// New starts headless Chromium for t, bounded by timeout, with a window and viewport of the
// given size and a profile of its own, and returns its tab's context; t's cleanup stops it.
func New(t testing.TB, width, height int, timeout time.Duration) context.Context {
	t.Helper()
	opts := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(Chromium(t)),
		chromedp.Flag("headless", "new"),
		chromedp.NoSandbox, // root in a container
		chromedp.DisableGPU,
		chromedp.WindowSize(width, height),
		chromedp.UserDataDir(t.TempDir()),
	)
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	t.Cleanup(cancel)
	alloc, cancelAlloc := chromedp.NewExecAllocator(ctx, opts...)
	t.Cleanup(cancelAlloc)
	tab, cancelTab := chromedp.NewContext(alloc)
	t.Cleanup(cancelTab)
	if err := chromedp.Do(tab, chromedp.EmulateViewport(int64(width), int64(height))); err != nil {
		t.Fatal(err)
	}
	return tab
}

// ScreenshotDir is where t saves its screenshots: $SWITCHBOARD_SCREENSHOTS/<test name> when
// that is set (a directory kept after the run, for a person or CI to look at), else the test's
// artifact directory (kept with go test -artifacts -outputdir DIR, else removed).
func ScreenshotDir(t *testing.T) string {
	t.Helper()
	root := os.Getenv("SWITCHBOARD_SCREENSHOTS")
	if root == "" {
		return t.ArtifactDir()
	}
	dir := filepath.Join(root, strings.ReplaceAll(t.Name(), "/", "_"))
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	return dir
}

// SaveScreenshot writes png as name.png in ScreenshotDir and logs where.
func SaveScreenshot(t *testing.T, name string, png []byte) {
	t.Helper()
	out := filepath.Join(ScreenshotDir(t), name+".png")
	if err := os.WriteFile(out, png, 0o644); err != nil {
		t.Fatal(err)
	}
	t.Logf("screenshot: %s", out)
}
