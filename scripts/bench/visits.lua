-- wrk / linkgate bench script for make bench-visits: the redirect
-- workload of make bench-serve (scripts/bench/redirect.lua: preloaded ids
-- from IDS_FILE, IDS_LIMIT of them) sent as a browser following a link
-- from a news site, so every request records a visit with a User-Agent
-- and a Referer to classify.
wrk.headers["User-Agent"] = "Mozilla/5.0 (Windows NT 10.0; Win64; x64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/124.0.0.0 Safari/537.36"
wrk.headers["Referer"] = "https://news.example.com/item?id=4242"
dofile("scripts/bench/redirect.lua")
