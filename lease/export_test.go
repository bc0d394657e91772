package lease

// Classify is classify for tests.
var Classify = classify
