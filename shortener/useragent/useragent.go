// Package useragent classifies User-Agent headers for visit statistics:
// browser family for people, and known crawlers, link-preview fetchers and
// HTTP libraries as bots; for both, the operating system family and the
// device type (desktop, mobile, tablet; bot for bots). It wraps github.com/medama-io/go-useragent, a
// maintained trie-based parser, and adds the link-preview fetchers and
// crawlers that it does not flag (Mastodon, Iframely, Embedly, Skype,
// Viber, VK, GPTBot, Bytespider, Wget) plus a name for each well-known bot.
//
// Results are cached in a fixed-size, lock-free table keyed by a hash of
// the header, so the redirect path pays a hash and a load for the user
// agents it has seen (the parser itself costs about a microsecond).
package useragent

import (
	"bytes"
	"hash/maphash"
	"slices"
	"sync/atomic"

	ua "github.com/medama-io/go-useragent"
	uaagents "github.com/medama-io/go-useragent/agents"

	"github.com/linkgate/linkgate/shortener"
	"github.com/linkgate/linkgate/shortener/visits"
)

var _ visits.Classifier = (*Classifier)(nil)

// bots are matched (case-sensitively, first match wins) before the parser:
// they name the bot; some are not flagged by the parser at all.
var bots = []struct {
	token string
	name  string
}{
	{"Slackbot", "Slack"}, {"Slack-ImgProxy", "Slack"},
	{"Twitterbot", "Twitter"},
	{"facebookexternalhit", "Facebook"}, {"Facebot", "Facebook"}, {"facebookcatalog", "Facebook"},
	{"Discordbot", "Discord"},
	{"TelegramBot", "Telegram"},
	{"WhatsApp", "WhatsApp"},
	{"LinkedInBot", "LinkedIn"},
	{"Mastodon", "Mastodon"},
	{"Iframely", "Iframely"},
	{"Embedly", "Embedly"},
	{"SkypeUriPreview", "Skype"},
	{"Viber", "Viber"},
	{"vkShare", "VK"},
	{"Snap URL Preview", "Snapchat"},
	{"redditbot", "Reddit"},
	{"Pinterest", "Pinterest"},
	{"Googlebot", "Google"}, {"Google-", "Google"}, {"AdsBot-Google", "Google"}, {"Mediapartners-Google", "Google"},
	{"bingbot", "Bing"},
	{"Applebot", "Apple"},
	{"YandexBot", "Yandex"},
	{"DuckDuckBot", "DuckDuckGo"},
	{"Baiduspider", "Baidu"},
	{"GPTBot", "OpenAI"}, {"ChatGPT-User", "OpenAI"}, {"OAI-SearchBot", "OpenAI"},
	{"ClaudeBot", "Anthropic"}, {"Claude-", "Anthropic"},
	{"Bytespider", "ByteDance"},
	{"AhrefsBot", "Ahrefs"}, {"SemrushBot", "Semrush"},
	{"HeadlessChrome", "Headless Chrome"},
	{"curl/", "curl"}, {"Wget/", "Wget"},
	{"python-requests", "Python"}, {"Python-urllib", "Python"}, {"aiohttp", "Python"},
	{"Go-http-client", "Go"},
}

// Names of the other classes.
const (
	OtherBrowser = "Other"
	OtherBot     = "Other bot"
	NoUserAgent  = "(no user agent)"
)

// oses are the operating system families, as the parser names them, and
// as they are counted; an OS it does not know is shortener.UnknownKey.
var oses = map[uaagents.OS]string{
	uaagents.OSAndroid: "Android", uaagents.OSChromeOS: "ChromeOS", uaagents.OSIOS: "iOS", uaagents.OSLinux: "Linux",
	uaagents.OSFreeBSD: "FreeBSD", uaagents.OSOpenBSD: "OpenBSD", uaagents.OSMacOS: "macOS", uaagents.OSWindows: "Windows",
}

// osNames and devices number the OS families and devices of a class.
var (
	osNames = []string{shortener.UnknownKey, "Android", "ChromeOS", "iOS", "Linux", "FreeBSD", "OpenBSD", "macOS", "Windows"}
	devices = []string{shortener.DeviceDesktop, shortener.DeviceMobile, shortener.DeviceTablet, shortener.DeviceBot}
)

// names are the browser and bot names Classify returns, bots first.
var names, botIndex, browserIndex = func() ([]visits.Agent, []uint16, map[string]uint16) {
	var all []visits.Agent
	index := map[visits.Agent]uint16{}
	add := func(a visits.Agent) uint16 {
		if i, ok := index[a]; ok {
			return i
		}
		i := uint16(len(all))
		index[a] = i
		all = append(all, a)
		return i
	}
	bi := make([]uint16, len(bots))
	for i, b := range bots {
		bi[i] = add(visits.Agent{Name: b.name, Bot: true})
	}
	add(visits.Agent{Name: OtherBot, Bot: true})
	add(visits.Agent{Name: NoUserAgent, Bot: true})
	add(visits.Agent{Name: OtherBrowser})
	browsers := map[string]uint16{}
	for _, b := range []string{"Android Browser", "Chrome", "Edge", "Firefox", "IE", "Opera", "Opera Mini", "Safari",
		"Vivaldi", "Amazon Silk", "Samsung Browser", "Falkon", "Nintendo Browser", "Yandex Browser", "Huawei Browser"} {
		browsers[b] = add(visits.Agent{Name: b})
	}
	return all, bi, browsers
}()

// agents is every class Classify can return, a name with an OS and a
// device each; cache entries index it: class(name, os, device).
var agents = func() []visits.Agent {
	all := make([]visits.Agent, 0, len(names)*len(osNames)*len(devices))
	for _, n := range names {
		for _, o := range osNames {
			for _, d := range devices {
				a := n
				a.OS, a.Device = o, d
				a.ID = uint16(len(all)) + 1 // numbered for the aggregate (visits.Agent.ID)
				all = append(all, a)
			}
		}
	}
	if len(all) >= visits.MaxAgentID || len(all) >= 1<<idBits-1 {
		panic("useragent: too many classes")
	}
	return all
}()

func class(name uint16, os, device int) uint16 {
	return (name*uint16(len(osNames))+uint16(os))*uint16(len(devices)) + uint16(device)
}

const (
	cacheSize = 4096 // entries; a power of two
	idBits    = 12   // bits of a cache entry that hold the class
	idMask    = 1<<idBits - 1
)

// Classifier classifies user agents. The zero value is not usable: call New.
type Classifier struct {
	parser *ua.Parser
	seed   maphash.Seed
	// cache maps a header's hash to its class: the hash's upper bits,
	// and 1 + the index in agents in the low idBits. Collisions just evict.
	cache [cacheSize]atomic.Uint64
}

// New returns a Classifier. Building the parser's trie takes a few
// milliseconds; make one per process.
func New() *Classifier {
	return &Classifier{parser: ua.NewParser(), seed: maphash.MakeSeed()}
}

// Classify returns the class of a User-Agent header value. It is safe for
// concurrent use and does not allocate for a header it has seen recently.
func (c *Classifier) Classify(header []byte) visits.Agent {
	h := maphash.Bytes(c.seed, header)
	slot := &c.cache[h%cacheSize]
	if e := slot.Load(); e != 0 && e>>idBits == h>>idBits {
		return agents[e&idMask-1]
	}
	i := c.classify(header)
	slot.Store(h&^idMask | uint64(i+1))
	return agents[i]
}

// classify is the uncached classification: an index into agents.
func (c *Classifier) classify(header []byte) uint16 {
	header = bytes.TrimSpace(header)
	if len(header) == 0 {
		return class(indexOf(NoUserAgent, true), 0, deviceBot)
	}
	name := uint16(0)
	known := false
	for i, b := range bots {
		if bytes.Contains(header, []byte(b.token)) {
			name, known = botIndex[i], true
			break
		}
	}
	a := c.parser.Parse(string(header))
	os := max(slices.Index(osNames, oses[a.OS()]), 0)
	switch {
	case known:
		return class(name, os, deviceBot)
	case a.IsBot():
		return class(indexOf(OtherBot, true), os, deviceBot)
	}
	device := 0 // desktop, also for TVs and what the parser cannot tell
	switch {
	case a.IsTablet(), a.IsMobile() && osNames[os] == "Android" && !bytes.Contains(header, []byte("Mobile")):
		// Android browsers on tablets leave "Mobile" out (Chrome's
		// documented convention); the parser counts them as phones.
		device = 2
	case a.IsMobile():
		device = 1
	}
	if i, ok := browserIndex[a.Browser().String()]; ok {
		return class(i, os, device)
	}
	return class(indexOf(OtherBrowser, false), os, device)
}

const deviceBot = 3 // index of shortener.DeviceBot in devices

func indexOf(name string, bot bool) uint16 {
	for i, a := range names {
		if a.Name == name && a.Bot == bot {
			return uint16(i)
		}
	}
	panic("useragent: unknown class " + name)
}
