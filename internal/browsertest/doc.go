// Package browsertest starts headless Chromium for the module's browser tests (the admin
// dashboard's and the demo's), with chromedp, and keeps their screenshots. It holds the one
// rule every browser suite follows: without a chromium binary a test skips, and with CI=true it
// fails, since CI must run it.
package browsertest
