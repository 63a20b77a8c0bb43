resource "aws_sqs_queue" "dlq" {
  name       = "jobs-dlq.fifo"
  fifo_queue = true
}

resource "aws_sqs_queue" "jobs" {
  name       = "jobs.fifo"
  fifo_queue = true
}
