module github.com/linkgate/linkgate

go 1.26
