-- wrk script for make bench-serve: POST /shortenURL, a unique URL per
-- request (the seed's body shape, with Content-Type: application/json).
local counter = 0
local run = tostring(os.time())
wrk.headers["Content-Type"] = "application/json"

function request()
	counter = counter + 1
	return wrk.format("POST", "/shortenURL", nil,
		'{"OriginalURL":"https://bench.example/' .. run .. '/' .. counter .. '"}')
end
