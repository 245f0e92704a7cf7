// Package httpapi adapts package core to HTTP: the routes and types generated
// from api/openapi.yaml, request validation, bearer identity, problem
// documents, the event stream and metrics. Handlers are thin: they translate
// a request, make one core call and map its result.
package httpapi

//go:generate go tool oapi-codegen -config cfg.yaml ../../api/openapi.yaml
