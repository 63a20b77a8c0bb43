provider "azurerm" {
  features {}
}

resource "azurerm_resource_group" "main" {
  name     = "rg-app-prod"
  location = "westeurope"

  tags = {
    env = "prod"
  }
}
