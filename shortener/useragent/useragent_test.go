package useragent_test

import (
	"testing"

	"github.com/linkgate/linkgate/shortener/useragent"
	"github.com/linkgate/linkgate/shortener/visits"
)

func TestClassify(t *testing.T) {
	tests := []struct {
		ua   string
		name string
		bot  bool
	}{
		{"Mozilla/5.0 (Windows NT 10.0; Win64; x64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/118.0.0.0 Safari/537.36", "Chrome", false},
		{"Mozilla/5.0 (Macintosh; Intel Mac OS X 10_15_7) AppleWebKit/605.1.15 (KHTML, like Gecko) Version/17.1 Safari/605.1.15", "Safari", false},
		{"Mozilla/5.0 (X11; Linux x86_64; rv:120.0) Gecko/20100101 Firefox/120.0", "Firefox", false},
		{"Mozilla/5.0 (iPhone; CPU iPhone OS 17_1 like Mac OS X) AppleWebKit/605.1.15 (KHTML, like Gecko) Version/17.1 Mobile/15E148 Safari/604.1", "Safari", false},
		{"Mozilla/5.0 (Windows NT 10.0; Win64; x64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/118.0.0.0 Safari/537.36 Edg/118.0.2088.76", "Edge", false},
		{"Mozilla/5.0 (Linux; Android 13; SM-S918B) AppleWebKit/537.36 (KHTML, like Gecko) SamsungBrowser/23.0 Chrome/115.0.0.0 Mobile Safari/537.36", "Samsung Browser", false},
		{"Mozilla/5.0 (Windows NT 10.0; Win64; x64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/118.0.0.0 Safari/537.36 OPR/104.0.0.0", "Opera", false},
		{"SomethingNew/1.0", useragent.OtherBrowser, false},
		// Link-preview fetchers: the pain point (shlink#1613, dub#1860).
		{"Slackbot-LinkExpanding 1.0 (+https://api.slack.com/robots)", "Slack", true},
		{"Twitterbot/1.0", "Twitter", true},
		{"facebookexternalhit/1.1 (+http://www.facebook.com/externalhit_uatext.php)", "Facebook", true},
		{"Mozilla/5.0 (compatible; Discordbot/2.0; +https://discordapp.com)", "Discord", true},
		{"TelegramBot (like TwitterBot)", "Telegram", true},
		{"WhatsApp/2.23.20.0", "WhatsApp", true},
		{"LinkedInBot/1.0 (compatible; Mozilla/5.0; Apache-HttpClient +http://www.linkedin.com)", "LinkedIn", true},
		{"http.rb/5.1.1 (Mastodon/4.2.1; +https://mastodon.social/)", "Mastodon", true},
		{"Mozilla/5.0 (compatible; Iframely/1.3.1; +https://iframely.com/docs/about)", "Iframely", true},
		{"Mozilla/5.0 (Windows NT 6.1; WOW64) SkypeUriPreview Preview/0.5 skype-url-preview@microsoft.com", "Skype", true},
		{"Mozilla/5.0 (Macintosh; Intel Mac OS X 10_11_1) AppleWebKit/601.2.4 (KHTML, like Gecko) Version/9.0.1 Safari/601.2.4 facebookexternalhit/1.1 Facebot Twitterbot/1.0", "Twitter", true},
		{"Viber/13.3.0", "Viber", true},
		// Crawlers and HTTP libraries.
		{"Mozilla/5.0 (compatible; Googlebot/2.1; +http://www.google.com/bot.html)", "Google", true},
		{"Mozilla/5.0 (compatible; bingbot/2.0; +http://www.bing.com/bingbot.htm)", "Bing", true},
		{"Mozilla/5.0 AppleWebKit/537.36 (KHTML, like Gecko; compatible; GPTBot/1.0; +https://openai.com/gptbot)", "OpenAI", true},
		{"Mozilla/5.0 (X11; Linux x86_64) AppleWebKit/537.36 (KHTML, like Gecko) HeadlessChrome/156.0.0.0 Safari/537.36", "Headless Chrome", true},
		{"Mozilla/5.0 (compatible; MJ12bot/v1.4.8; http://mj12bot.com/)", useragent.OtherBot, true},
		{"curl/8.4.0", "curl", true},
		{"Wget/1.21.3", "Wget", true},
		{"Go-http-client/1.1", "Go", true},
		{"", useragent.NoUserAgent, true},
		{"   ", useragent.NoUserAgent, true},
	}
	c := useragent.New()
	for _, tt := range tests {
		for range 2 { // uncached, then cached
			got := c.Classify([]byte(tt.ua))
			if got.Name != tt.name || got.Bot != tt.bot || got.ID == 0 || got.ID >= visits.MaxAgentID {
				t.Errorf("Classify(%q) = %+v, want {%s %v} with an ID", tt.ua, got, tt.name, tt.bot)
			}
		}
	}
}

// The OS family and the device type, from real User-Agent headers: bots'
// device is bot whatever they claim to run on.
func TestClassifyOSAndDevice(t *testing.T) {
	tests := []struct {
		ua, name, os, device string
	}{
		{"Mozilla/5.0 (Windows NT 10.0; Win64; x64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/118.0.0.0 Safari/537.36", "Chrome", "Windows", "desktop"},
		{"Mozilla/5.0 (Macintosh; Intel Mac OS X 10_15_7) AppleWebKit/605.1.15 (KHTML, like Gecko) Version/17.1 Safari/605.1.15", "Safari", "macOS", "desktop"},
		{"Mozilla/5.0 (X11; Linux x86_64; rv:120.0) Gecko/20100101 Firefox/120.0", "Firefox", "Linux", "desktop"},
		{"Mozilla/5.0 (iPhone; CPU iPhone OS 17_1 like Mac OS X) AppleWebKit/605.1.15 (KHTML, like Gecko) Version/17.1 Mobile/15E148 Safari/604.1", "Safari", "iOS", "mobile"},
		{"Mozilla/5.0 (iPad; CPU OS 17_1 like Mac OS X) AppleWebKit/605.1.15 (KHTML, like Gecko) Version/17.1 Mobile/15E148 Safari/604.1", "Safari", "iOS", "tablet"},
		{"Mozilla/5.0 (Linux; Android 14; Pixel 8) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/120.0.0.0 Mobile Safari/537.36", "Chrome", "Android", "mobile"},
		{"Mozilla/5.0 (Linux; Android 13; SM-X700) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/120.0.0.0 Safari/537.36", "Chrome", "Android", "tablet"},
		{"Mozilla/5.0 (X11; CrOS x86_64 14541.0.0) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/120.0.0.0 Safari/537.36", "Chrome", "ChromeOS", "desktop"},
		{"Mozilla/5.0 (Linux; Android 6.0.1; Nexus 5X Build/MMB29P) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/120.0.0.0 Mobile Safari/537.36 (compatible; Googlebot/2.1; +http://www.google.com/bot.html)", "Google", "Android", "bot"},
		{"Twitterbot/1.0", "Twitter", "(unknown)", "bot"},
		{"SomethingNew/1.0", useragent.OtherBrowser, "(unknown)", "desktop"},
		{"", useragent.NoUserAgent, "(unknown)", "bot"},
	}
	c := useragent.New()
	for _, tt := range tests {
		for range 2 { // uncached, then cached
			got := c.Classify([]byte(tt.ua))
			if got.Name != tt.name || got.OS != tt.os || got.Device != tt.device {
				t.Errorf("Classify(%q) = %+v, want %s on %s, %s", tt.ua, got, tt.name, tt.os, tt.device)
			}
		}
	}
}

func FuzzClassify(f *testing.F) {
	f.Add("Mozilla/5.0 (compatible; Googlebot/2.1)")
	f.Add("Twitterbot/1.0")
	f.Add("")
	c := useragent.New()
	fresh := useragent.New()
	f.Fuzz(func(t *testing.T, s string) {
		a, b := c.Classify([]byte(s)), c.Classify([]byte(s))
		if a != b || a.Name == "" {
			t.Fatalf("Classify(%q) = %+v then %+v", s, a, b)
		}
		if u := fresh.Classify([]byte(s)); u != a {
			t.Fatalf("Classify(%q): cached %+v, fresh %+v", s, a, u)
		}
	})
}

func BenchmarkClassifyCached(b *testing.B) {
	c := useragent.New()
	ua := []byte("Mozilla/5.0 (Windows NT 10.0; Win64; x64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/118.0.0.0 Safari/537.36")
	c.Classify(ua)
	b.ReportAllocs()
	for b.Loop() {
		c.Classify(ua)
	}
}
