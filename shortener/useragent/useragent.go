// Package useragent classifies User-Agent headers for visit statistics:
// browser family for people, and known crawlers, link-preview fetchers and
// HTTP libraries as bots. It wraps github.com/medama-io/go-useragent, a
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
	"sync/atomic"

	ua "github.com/medama-io/go-useragent"

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

// agents is every class Classify can return; cache entries index it.
var agents, botIndex, browserIndex = func() ([]visits.Agent, []uint8, map[string]uint8) {
	var all []visits.Agent
	index := map[visits.Agent]uint8{}
	add := func(a visits.Agent) uint8 {
		if i, ok := index[a]; ok {
			return i
		}
		i := uint8(len(all))
		index[a] = i
		a.ID = uint16(i) + 1 // numbered for the aggregate (visits.Agent.ID)
		all = append(all, a)
		return i
	}
	bi := make([]uint8, len(bots))
	for i, b := range bots {
		bi[i] = add(visits.Agent{Name: b.name, Bot: true})
	}
	add(visits.Agent{Name: OtherBot, Bot: true})
	add(visits.Agent{Name: NoUserAgent, Bot: true})
	add(visits.Agent{Name: OtherBrowser})
	browsers := map[string]uint8{}
	for _, b := range []string{"Android Browser", "Chrome", "Edge", "Firefox", "IE", "Opera", "Opera Mini", "Safari",
		"Vivaldi", "Amazon Silk", "Samsung Browser", "Falkon", "Nintendo Browser", "Yandex Browser", "Huawei Browser"} {
		browsers[b] = add(visits.Agent{Name: b})
	}
	return all, bi, browsers
}()

const cacheSize = 4096 // entries; a power of two

// Classifier classifies user agents. The zero value is not usable: call New.
type Classifier struct {
	parser *ua.Parser
	seed   maphash.Seed
	// cache maps a header's hash to its class: the hash's upper 56 bits,
	// and 1 + the index in agents in the low 8. Collisions just evict.
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
	if e := slot.Load(); e != 0 && e>>8 == h>>8 {
		return agents[e&0xff-1]
	}
	i := c.classify(header)
	slot.Store(h&^0xff | uint64(i+1))
	return agents[i]
}

// classify is the uncached classification: an index into agents.
func (c *Classifier) classify(header []byte) uint8 {
	header = bytes.TrimSpace(header)
	if len(header) == 0 {
		return indexOf(NoUserAgent, true)
	}
	for i, b := range bots {
		if bytes.Contains(header, []byte(b.token)) {
			return botIndex[i]
		}
	}
	a := c.parser.Parse(string(header))
	if a.IsBot() {
		return indexOf(OtherBot, true)
	}
	if i, ok := browserIndex[a.Browser().String()]; ok {
		return i
	}
	return indexOf(OtherBrowser, false)
}

func indexOf(name string, bot bool) uint8 {
	for i, a := range agents {
		if a.Name == name && a.Bot == bot {
			return uint8(i)
		}
	}
	panic("useragent: unknown class " + name)
}
