variable "name" {
  type = string
}

variable "vpc_id" {
  type = string
}

variable "port" {
  type = number

  validation {
    condition     = var.port > 1024
    error_message = "The port must be above 1024."
  }
}

resource "aws_lb_target_group" "this" {
  name     = var.name
  port     = var.port
  protocol = "HTTP"
  vpc_id   = var.vpc_id

  health_check {
    path     = "/health"
    interval = 30
  }
}

resource "aws_instance" "this" {
  ami           = "ami-0c55b159cbfafe1f0"
  instance_type = "t3.micro"

  root_block_device {
    volume_size = 20
    encrypted   = true
  }

  tags = {
    Name = var.name
  }
}

output "target_group_arn" {
  value = aws_lb_target_group.this.arn
}
