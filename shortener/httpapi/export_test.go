package httpapi

// RouteNames are the names of every route, for tests that must cover
// them all.
var RouteNames = routeNames[:]
