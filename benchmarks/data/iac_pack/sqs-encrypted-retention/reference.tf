resource "aws_sqs_queue" "billing" {
  name                      = "billing"
  sqs_managed_sse_enabled   = true
  message_retention_seconds = 345600
}
