-- POST /shortenURL with a correct JSON body, for linkgate serve or the
-- seed's shortener: linkgate bench -R 600 -L -s scripts/shorten-post.lua http://HOST:8080/shortenURL
-- (wrk2 runs it unchanged). The seed article's post.lua sent a bare URL as
-- the body with a JSON content type, which a strict server rejects with 400.
-- Every request is the same: use --scenario shorten for unique URLs.

wrk.method = "POST"
wrk.headers["Content-Type"] = "application/json"
wrk.body = '{"OriginalURL":"https://aws.amazon.com/ec2/graviton/"}'
