// Package volumes prepares a pod's volumes on the host before its
// containers start, and removes them once the pod is gone.
//
// A Plugin handles one type of volume; ObjectGetter and TokenGetter
// supply the API objects and tokens that configMap, secret and projected
// volumes show.
package volumes
