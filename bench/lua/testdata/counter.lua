-- wrk's stock counter.lua (written from its documented behaviour): a dynamic
-- request() that changes the path and a header on every request.

counter = 0

request = function()
   path = "/" .. counter
   wrk.headers["X-Counter"] = counter
   counter = counter + 1
   return wrk.format(nil, path)
end
