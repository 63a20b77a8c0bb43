variable "env" {
  type = string
}

variable "queues" {
  type = number
}

module "queue" {
  source = "../queue"
  count  = var.queues

  name = "${var.env}-jobs-${count.index}"
}

resource "aws_sns_topic" "alerts" {
  name = "${var.env}-alerts"
}

output "queue_urls" {
  value = module.queue[*].url
}
