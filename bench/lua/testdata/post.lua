-- wrk's stock post.lua (written from its documented behaviour): a static
-- POST with a form body.

wrk.method = "POST"
wrk.body   = "foo=bar&baz=quux"
wrk.headers["Content-Type"] = "application/x-www-form-urlencoded"
