-- setup/init/response/done together, as wrk's setup.lua example uses them:
-- setup names each thread, init reads the arguments after --, response
-- counts statuses per thread, done reads every thread's count back.

local counter = 1
local threads = {}

function setup(thread)
   thread:set("id", counter)
   table.insert(threads, thread)
   counter = counter + 1
end

function init(args)
   requests  = 0
   responses = 0
   tag = args[1]
   wrk.headers["X-Tag"] = tag
end

function request()
   requests = requests + 1
   return wrk.request()
end

function response(status, headers, body)
   if status == 200 and body == "ok" and headers["X-Served"] == "yes" then
      responses = responses + 1
   end
end

function done(summary, latency, requests)
   local total = 0
   for _, thread in ipairs(threads) do
      total = total + thread:get("responses")
      print(string.format("thread %d tag %s responses %d", thread:get("id"), thread:get("tag"), thread:get("responses")))
   end
   print(string.format("summary requests %d responses %d errors %d p50 %d max %d",
      summary.requests, total, summary.errors.status, latency:percentile(50), latency.max))
end
