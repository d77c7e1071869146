wrk.method = "POST"
wrk.body = = "x"
