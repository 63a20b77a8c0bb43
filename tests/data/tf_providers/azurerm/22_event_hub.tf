provider "azurerm" {
  features {}
}

resource "azurerm_resource_group" "eh" {
  name     = "rg-eh"
  location = "westeurope"
}

resource "azurerm_eventhub_namespace" "main" {
  name                = "eh-acme"
  location            = azurerm_resource_group.eh.location
  resource_group_name = azurerm_resource_group.eh.name
  sku                 = "Standard"
  capacity            = 2

  identity {
    type = "SystemAssigned"
  }
}

resource "azurerm_eventhub" "telemetry" {
  name              = "telemetry"
  namespace_id      = azurerm_eventhub_namespace.main.id
  partition_count   = 4
  message_retention = 1
}
