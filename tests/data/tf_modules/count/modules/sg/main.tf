variable "name" {
  type = string
}

variable "vpc_id" {
  type = string
}

variable "rules" {
  type = list(object({
    port        = number
    cidr        = string
    description = optional(string)
  }))
}

resource "aws_security_group" "this" {
  name   = var.name
  vpc_id = var.vpc_id

  dynamic "ingress" {
    for_each = var.rules
    content {
      from_port   = ingress.value.port
      to_port     = ingress.value.port
      protocol    = "tcp"
      cidr_blocks = [ingress.value.cidr]
      description = ingress.value.description
    }
  }
}

output "id" {
  value = aws_security_group.this.id
}
