-- wrk script for make bench-serve: GET /{id} over preloaded ids.
-- IDS_FILE names a file of ids, one per line, in random order; every
-- request is pre-built in init() so request() only indexes a table, which
-- keeps wrk's own cost per request as low as for a static request.
local reqs, n, i = {}, 0, 0

function init(args)
	local file = os.getenv("IDS_FILE")
	local limit = tonumber(os.getenv("IDS_LIMIT") or "0")
	for id in io.lines(file) do
		n = n + 1
		reqs[n] = wrk.format("GET", "/" .. id)
		if limit > 0 and n >= limit then break end
	end
	i = math.random(n) - 1
end

function request()
	i = i + 1
	if i > n then i = 1 end
	return reqs[i]
end
